#include "gil/gil_hooks.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#include "common/compat.h"
#include "format/wire.h"
#include "tracer/gil_accounting.h"
#include "tracer/thread_state.h"

namespace pinsight::gil_hooks {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
constexpr bool kSupported = true;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
constexpr bool kSupported = true;
#else
constexpr uint32_t kJumpSlot = 0;
constexpr uint32_t kGlobDat = 0;
constexpr bool kSupported = false;
#endif

// ---- the wrappers: the real functions are reached through our own GOT, never patched ----

PyThreadState *save_thread() {
  int saved_errno = errno;
  if (ThreadState *state = thread_states::current_ptr) gil_accounting::before_release(*state);
  errno = saved_errno;
  return PyEval_SaveThread();
}

void restore_thread(PyThreadState *tstate) {
  ThreadState *state = thread_states::current_ptr;
  if (!state || state->gil.released_at == 0) {
    PyEval_RestoreThread(tstate);
    return;
  }
  int saved_errno = errno;
  uint64_t start = gil_accounting::monotonic_ns();
  PyEval_RestoreThread(tstate);
  gil_accounting::after_take_back(*state, start, wire::kGilSaveRestore);
  errno = saved_errno;
}

PyGILState_STATE gilstate_ensure() {
  // Already held (a callback on a Python thread): nothing is waited for.
  if (!gil_accounting::enabled.load(std::memory_order_relaxed) || PyGILState_Check()) {
    return PyGILState_Ensure();
  }
  int saved_errno = errno;
  uint64_t start = gil_accounting::monotonic_ns();
  PyGILState_STATE result = PyGILState_Ensure();
  ThreadState *state = thread_states::current_ptr;
  if (state && state->gil.released_at != 0) {
    gil_accounting::after_take_back(*state, start, wire::kGilState);
  } else {
    // A foreign thread's first Ensure (the GIL is held now: its state may be made).
    uint64_t waited = gil_accounting::monotonic_ns() - start;
    gil_accounting::after_first_take(*thread_states::current(), waited, wire::kGilState);
  }
  errno = saved_errno;
  return result;
}

void gilstate_release(PyGILState_STATE old) {
  ThreadState *state = thread_states::current_ptr;
  if (!state || !gil_accounting::enabled.load(std::memory_order_relaxed)) {
    PyGILState_Release(old);
    return;
  }
  int saved_errno = errno;
  GilPoint before = state->gil;
  gil_accounting::before_release(*state);
  PyGILState_Release(old);
  if (PyGILState_Check()) state->gil = before;  // nested Ensure: the GIL is still held
  errno = saved_errno;
}

void *dlopen_hook(const char *file, int mode);

struct Hook {
  const char *name;
  void *wrapper;
  // Only in the interpreter's own object (libpython or the executable), whose
  // dlopen loads extension modules by full path: glibc resolves a relative name
  // with the *caller's* RUNPATH, so a library's own dlopen calls stay its own.
  bool core_only;
};
const Hook kHooks[] = {
    {"PyEval_SaveThread", reinterpret_cast<void *>(&save_thread), false},
    {"PyEval_RestoreThread", reinterpret_cast<void *>(&restore_thread), false},
    {"PyGILState_Ensure", reinterpret_cast<void *>(&gilstate_ensure), false},
    {"PyGILState_Release", reinterpret_cast<void *>(&gilstate_release), false},
    {"dlopen", reinterpret_cast<void *>(&dlopen_hook), true},
};

struct Patch {
  void **slot;
  void *original;
  void *wrapper;
  bool read_only;  // in the object's RELRO segment
};

// Patches in place; the lock serialises install, dlopen's re-scans and uninstall.
std::mutex *lock = new std::mutex();
std::vector<Patch> &patches = *new std::vector<Patch>();
std::atomic<bool> armed{false};
std::string own_object;  // our extension module's path

bool write_slot(void **slot, void *value, bool read_only) {
  auto address = reinterpret_cast<uintptr_t>(slot);
  if (!read_only) {
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    return true;
  }
  // Full RELRO: the GOT was made read-only after relocation; it goes back so.
  long page = sysconf(_SC_PAGESIZE);
  auto *start = reinterpret_cast<void *>(address & ~static_cast<uintptr_t>(page - 1));
  size_t length = address + sizeof(void *) - reinterpret_cast<uintptr_t>(start);
  if (mprotect(start, length, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_RELEASE);
  mprotect(start, length, PROT_READ);
  return true;
}

bool ours(const char *name) {
  if (!name || !*name) return false;  // the executable
  if (!own_object.empty() && own_object == name) return true;
  // Our other objects (the test module, the provider, the malloc interposer).
  const char *base = std::strrchr(name, '/');
  base = base ? base + 1 : name;
  return std::strstr(base, "pinsight") != nullptr || std::strncmp(base, "linux-", 6) == 0;
}

struct Tables {
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  const ElfW(Rela) *jmprel = nullptr;
  size_t jmprel_size = 0;
  const ElfW(Rela) *rela = nullptr;
  size_t rela_size = 0;
  bool plt_is_rela = true;
};

// The object holds CPython's own code (it defines PyEval_SaveThread).
bool is_core(const dl_phdr_info *info) {
  auto address = reinterpret_cast<uintptr_t>(&PyEval_SaveThread);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph.p_vaddr;
    if (ph.p_type == PT_LOAD && address >= start && address < start + ph.p_memsz) return true;
  }
  return false;
}

void patch_relocations(const dl_phdr_info *info, const Tables &t, const ElfW(Rela) * relocs,
                       size_t size, uintptr_t relro_start, uintptr_t relro_end, bool core) {
  if (!relocs) return;
  for (size_t i = 0; i < size / sizeof(ElfW(Rela)); ++i) {
    const ElfW(Rela) &r = relocs[i];
    uint32_t type = static_cast<uint32_t>(ELF64_R_TYPE(r.r_info));
    if (type != kJumpSlot && type != kGlobDat) continue;
    const ElfW(Sym) &sym = t.symtab[ELF64_R_SYM(r.r_info)];
    if (sym.st_shndx != SHN_UNDEF) continue;  // the object's own function: an internal call
    const char *name = t.strtab + sym.st_name;
    for (const Hook &hook : kHooks) {
      if (std::strcmp(name, hook.name) != 0) continue;
      if (hook.core_only && !core) break;
      auto **slot = reinterpret_cast<void **>(info->dlpi_addr + r.r_offset);
      void *current = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
      if (current == hook.wrapper) break;  // patched by an earlier scan
      auto address = reinterpret_cast<uintptr_t>(slot);
      bool read_only = address >= relro_start && address < relro_end;
      if (write_slot(slot, hook.wrapper, read_only)) {
        patches.push_back({slot, current, hook.wrapper, read_only});
      }
      break;
    }
  }
}

int scan_object(dl_phdr_info *info, size_t, void *) {
  if (ours(info->dlpi_name)) return 0;
  const ElfW(Dyn) *dynamic = nullptr;
  uintptr_t relro_start = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + ph.p_vaddr);
    } else if (ph.p_type == PT_GNU_RELRO) {
      relro_start = info->dlpi_addr + ph.p_vaddr;
      relro_end = relro_start + ph.p_memsz;
    }
  }
  if (!dynamic) return 0;
  // glibc relocates these pointers in memory; other loaders may not.
  auto address = [info](ElfW(Addr) value) {
    return value < info->dlpi_addr ? value + info->dlpi_addr : value;
  };
  Tables t;
  for (const ElfW(Dyn) *d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        t.symtab = reinterpret_cast<const ElfW(Sym) *>(address(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        t.strtab = reinterpret_cast<const char *>(address(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        t.jmprel = reinterpret_cast<const ElfW(Rela) *>(address(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        t.jmprel_size = d->d_un.d_val;
        break;
      case DT_RELA:
        t.rela = reinterpret_cast<const ElfW(Rela) *>(address(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        t.rela_size = d->d_un.d_val;
        break;
      case DT_PLTREL:
        t.plt_is_rela = d->d_un.d_val == DT_RELA;
        break;
      default:
        break;
    }
  }
  if (!t.symtab || !t.strtab || !t.plt_is_rela) return 0;
  bool core = is_core(info);
  patch_relocations(info, t, t.jmprel, t.jmprel_size, relro_start, relro_end, core);
  patch_relocations(info, t, t.rela, t.rela_size, relro_start, relro_end, core);
  return 0;
}

void scan() {
  std::lock_guard<std::mutex> guard(*lock);
  if (armed.load()) dl_iterate_phdr(&scan_object, nullptr);
}

void *dlopen_hook(const char *file, int mode) {
  void *handle = dlopen(file, mode);
  if (handle && armed.load(std::memory_order_relaxed)) {
    int saved_errno = errno;
    scan();  // an extension module just loaded: patch it before its init runs code of ours
    errno = saved_errno;
  }
  return handle;
}

}  // namespace

bool install(std::string *why_not) {
  if (!kSupported) {
    if (why_not) *why_not = "gil events: GOT patching is implemented for x86-64 and AArch64 only";
    return false;
  }
  if (own_object.empty()) {
    Dl_info self;
    if (dladdr(reinterpret_cast<void *>(&save_thread), &self) != 0 && self.dli_fname) {
      own_object = self.dli_fname;
    }
  }
  armed.store(true);
  scan();
  return true;
}

void uninstall() {
  std::lock_guard<std::mutex> guard(*lock);
  armed.store(false);
  // Patches are undone newest first; an entry someone patched after us keeps theirs.
  for (auto it = patches.rbegin(); it != patches.rend(); ++it) {
    // Extension modules are never unloaded by CPython: the slot is still mapped.
    if (__atomic_load_n(it->slot, __ATOMIC_ACQUIRE) != it->wrapper) continue;
    write_slot(it->slot, it->original, it->read_only);
  }
  patches.clear();
}

bool installed() { return armed.load(); }

size_t patched_count() {
  std::lock_guard<std::mutex> guard(*lock);
  return patches.size();
}

void after_fork_child() { lock = new std::mutex(); }

}  // namespace pinsight::gil_hooks

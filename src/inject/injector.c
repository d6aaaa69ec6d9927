// pinsight-python-inject: queue one pending call in a running CPython 3.8-3.13
// (Py_AddPendingCall(PyRun_SimpleString, code)) without a debugger.
//
// Why not gdb: to call a function in the target, gdb saves and restores the
// whole XSAVE area, which Debian 12's gdb cannot write on processors with AMX;
// it then leaves the interrupted system call's restart state broken and the
// program sees errno 514. We never ask the kernel to rewrite extended register
// state, and never leave the target depending on us:
//
// 1. One thread is interrupted (PTRACE_SEIZE + PTRACE_INTERRUPT), preferably
//    one blocked in a system call that the kernel restarts transparently
//    (sleep, read, select, poll, wait): such a thread holds no lock of
//    CPython's pending-call queue. Never one in futex (lock state) or in
//    epoll_wait (which would return EINTR).
// 2. Two or three system calls are made in it at a `syscall` instruction of
//    its own text, between PTRACE_SYSCALL's stops: mmap of a data page (request code, result slot)
//    and, the first time only, of a code page holding the trampoline below. Only the general
//    registers change, and they are put back after each call.
// 3. The original registers, the legacy FPU/SSE state (PTRACE_GETFPREGS, a
//    fixed 512-byte image) and the call's arguments are written to the
//    thread's own stack below its red zone; the thread is pointed at the
//    trampoline and released at once (PTRACE_DETACH). The trampoline calls
//    Py_AddPendingCall, writes its result to the data page, restores every
//    register, re-issues the interrupted system call the way the kernel would
//    have, and jumps back. From then on the target does not need us: a killed
//    injector cannot leave it half-way.
//
// The code page is never unmapped (it is reused by later injections: the
// same bytes, no per-call data); the data page is released by the injected
// code once the trampoline has marked it done (python/pinsight_python/activation/remote.py).
//
// Usage: pinsight-python-inject PID ADD_PENDING_CALL RUN_SIMPLE_STRING
//                               SYSCALL_INSTRUCTION CODE [FAIL_AT PAUSE_AT]
// Addresses in hex, in the target. CODE holds 0x0000000000000000 where the
// data page's own address goes. Prints "ok tid=T page=0xP rc=R" and exits 0,
// or prints "error: ..." and exits 1 with the target as it was.
// Test hooks, passed on by attach from its environment (the injector reads
// none): FAIL_AT=STAGE (PINSIGHT_PYTHON_INJECT_FAIL) stops at that stage as a
// failure would; PAUSE_AT=STAGE[:SECONDS] (PINSIGHT_PYTHON_INJECT_PAUSE) sleeps
// there (so that a test can kill us or the target); "" for none; the stages are
// named in `stage_names`.

#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if !defined(__x86_64__)
#error "pinsight-python-inject is written for x86-64 (attach falls back to gdb elsewhere)"
#endif

// ---------------------------------------------------------------- trampoline

// What the trampoline finds at its stack pointer (16-byte aligned) on entry.
struct save_area {
  uint64_t function;    // 0: Py_AddPendingCall
  uint64_t arg0;        // 8: PyRun_SimpleString
  uint64_t arg1;        // 16: the code, in the data page
  uint64_t result;      // 24: the data page's result slot
  uint64_t slot;        // 32: original rsp - 144 (return address; original rbx above it)
  uint64_t rflags;      // 40
  uint64_t rax;         // 48
  uint64_t rcx;         // 56
  uint64_t rdx;         // 64
  uint64_t rsi;         // 72
  uint64_t rdi;         // 80
  uint64_t r8;          // 88
  uint64_t r9;          // 96
  uint64_t r10;         // 104
  uint64_t r11;         // 112
  uint64_t rbp;         // 120
  uint64_t r12;         // 128
  uint64_t r13;         // 136
  uint64_t r14;         // 144
  uint64_t r15;         // 152
  uint64_t padding[2];  // 160
  uint8_t fxsave[512];  // 176: fxrstor64 needs 16-byte alignment
};
_Static_assert(offsetof(struct save_area, fxsave) == 176, "trampoline offsets");
_Static_assert(sizeof(struct save_area) % 16 == 0, "stack alignment");

// Below the stack pointer: the red zone (128 bytes) the interrupted code may use,
// then the return address and rbx, which `ret $136` consumes.
enum { RED_ZONE = 128, SLOT_BELOW_SP = 144 };

// The data page: the trampoline writes rc, then the done mark (its last access).
enum { RESULT_RC = 0, RESULT_DONE = 8, CODE_OFFSET = 64 };
#define DONE_MARK 0x656e6f6474686770ULL  // "pghtdone"

extern const unsigned char pinsight_trampoline_begin[];
extern const unsigned char pinsight_trampoline_entry[];
extern const unsigned char pinsight_trampoline_end[];

// Position-independent; reads nothing but the save area on its own stack.
__asm__(
    ".pushsection .rodata\n"
    ".balign 16\n"
    ".globl pinsight_trampoline_begin\n"
    "pinsight_trampoline_begin:\n"
    ".ascii \"pinsight-python trampoline v1\\0\\0\\0\"\n"  // 32 bytes: how a later injection knows
                                                           // the page
    ".globl pinsight_trampoline_entry\n"
    "pinsight_trampoline_entry:\n"
    "  movq %rsp, %rbx\n"
    "  movq 8(%rbx), %rdi\n"
    "  movq 16(%rbx), %rsi\n"
    "  callq *(%rbx)\n"
    "  movslq %eax, %rax\n"
    "  movq 24(%rbx), %rcx\n"
    "  movq %rax, (%rcx)\n"
    "  movabsq $0x656e6f6474686770, %rax\n"
    "  movq %rax, 8(%rcx)\n"  // done: the data page is not touched again
    "  fxrstor64 176(%rbx)\n"
    "  pushq 40(%rbx)\n"
    "  popfq\n"  // no instruction below changes a flag
    "  movq 48(%rbx), %rax\n"
    "  movq 56(%rbx), %rcx\n"
    "  movq 64(%rbx), %rdx\n"
    "  movq 72(%rbx), %rsi\n"
    "  movq 80(%rbx), %rdi\n"
    "  movq 88(%rbx), %r8\n"
    "  movq 96(%rbx), %r9\n"
    "  movq 104(%rbx), %r10\n"
    "  movq 112(%rbx), %r11\n"
    "  movq 120(%rbx), %rbp\n"
    "  movq 128(%rbx), %r12\n"
    "  movq 136(%rbx), %r13\n"
    "  movq 144(%rbx), %r14\n"
    "  movq 152(%rbx), %r15\n"
    // From here on only memory at or above rsp is read: a signal handler
    // running in between builds its frame below rsp's red zone.
    "  movq 32(%rbx), %rsp\n"
    "  movq 8(%rsp), %rbx\n"
    "  retq $136\n"
    ".globl pinsight_trampoline_end\n"
    "pinsight_trampoline_end:\n"
    ".popsection\n");

// ---------------------------------------------------------------- reporting

enum stage {
  STAGE_SEIZED,         // the thread is stopped, nothing changed
  STAGE_DATA_PAGE,      // the data page is mapped
  STAGE_CODE_PAGE,      // the trampoline is in place
  STAGE_STACK_WRITTEN,  // the save area is on the thread's stack
  STAGE_RELEASED,       // the thread runs the trampoline on its own
};
static const char *const stage_names[] = {"seized", "data-page", "code-page", "stack-written",
                                          "released"};

static pid_t target_pid;
static volatile sig_atomic_t parent_gone;

static void vfail(const char *format, va_list args) __attribute__((format(printf, 1, 0), noreturn));
static void vfail(const char *format, va_list args) {
  printf("error: ");
  vprintf(format, args);
  printf("\n");
  fflush(stdout);
  exit(1);
}

static void fail(const char *format, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfail(format, args);
}

// The test hooks attach passes on (its PINSIGHT_PYTHON_INJECT_FAIL and _PAUSE):
// "" or a stage, "STAGE" or "STAGE:SECONDS".
static const char *fail_at = "";
static const char *pause_at = "";

// Whether the hook names the stage.
static bool stage_hook(enum stage stage, const char *value, unsigned *seconds) {
  size_t length = strlen(stage_names[stage]);
  if (value == NULL || strncmp(value, stage_names[stage], length) != 0) return false;
  if (value[length] == ':' && seconds != NULL) *seconds = (unsigned)atoi(value + length + 1);
  return value[length] == '\0' || value[length] == ':';
}

// A failure forced at a stage, or our parent (attach) gone: give up there.
static bool should_stop(enum stage stage) {
  unsigned seconds = 30;
  if (stage_hook(stage, pause_at, &seconds)) sleep(seconds);
  return parent_gone || stage_hook(stage, fail_at, NULL);
}

static void on_parent_gone(int signal_number) {
  (void)signal_number;
  parent_gone = 1;
}

// ---------------------------------------------------------------- the target's threads

// x86-64 system calls after which the thread holds no lock of ours and that the
// kernel restarts after a ptrace stop without the program seeing it.
static bool restartable_wait(long number) {
  switch (number) {
    case SYS_read:
    case SYS_write:
    case SYS_pread64:
    case SYS_pwrite64:
    case SYS_readv:
    case SYS_writev:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_select:
    case SYS_pselect6:
    case SYS_nanosleep:
    case SYS_clock_nanosleep:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_pause:
      return true;
    default:
      return false;
  }
}

// -2: running in user space; -1: unknown; else the system call it waits in.
static long thread_syscall(pid_t tid) {
  char path[64], text[256];
  snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", target_pid, tid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return -1;
  text[n] = '\0';
  if (strncmp(text, "running", 7) == 0) return -2;
  char *end;
  long number = strtol(text, &end, 10);
  return end == text ? -1 : number;
}

enum { MAX_THREADS = 4096 };

// The main thread first, then the others in /proc's order.
static size_t list_threads(pid_t *tids) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", target_pid);
  DIR *dir = opendir(path);
  if (dir == NULL) fail("cannot list the threads of process %d: %s", target_pid, strerror(errno));
  size_t count = 0;
  tids[count++] = target_pid;
  struct dirent *entry;
  while ((entry = readdir(dir)) != NULL && count < MAX_THREADS) {
    pid_t tid = (pid_t)atoi(entry->d_name);
    if (tid > 0 && tid != target_pid) tids[count++] = tid;
  }
  closedir(dir);
  return count;
}

// ---------------------------------------------------------------- ptrace

struct stopped {
  pid_t tid;
  struct user_regs_struct regs;  // as the thread must go on
  struct user_fpregs_struct fpregs;
  int pending_signal;  // seen while we held it: delivered on release
};

static long monotonic_ms(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

// Waits for the thread's next stop. 0: stopped (status set); -1: it exited or
// did not stop within the limit.
static int wait_stop(pid_t tid, int *status, long limit_ms) {
  long deadline = monotonic_ms() + limit_ms;
  for (;;) {
    pid_t got = waitpid(tid, status, __WALL | WNOHANG);
    if (got == tid) return WIFSTOPPED(*status) ? 0 : -1;
    if (got < 0 && errno != EINTR) return -1;
    if (monotonic_ms() > deadline) return -1;
    usleep(200);
  }
}

static bool is_interrupt_stop(int status) {
  return (status >> 16) == PTRACE_EVENT_STOP &&
         (WSTOPSIG(status) == SIGTRAP || WSTOPSIG(status) == SIGSTOP ||
          WSTOPSIG(status) == SIGTSTP || WSTOPSIG(status) == SIGTTIN ||
          WSTOPSIG(status) == SIGTTOU);
}

// Seize and stop one thread. Signals that arrive meanwhile are passed on at once.
static bool seize(pid_t tid, struct stopped *thread) {
  memset(thread, 0, sizeof *thread);
  thread->tid = tid;
  if (ptrace(PTRACE_SEIZE, tid, 0, PTRACE_O_TRACESYSGOOD) != 0) {
    if (errno == EPERM) {
      fail("ptrace refused (%s): not permitted to trace process %d", strerror(errno), target_pid);
    }
    return false;  // the thread exited
  }
  if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0) return false;
  for (;;) {
    int status;
    if (wait_stop(tid, &status, 2000) != 0) return false;  // detached as we exit
    if (is_interrupt_stop(status)) {
      if (WSTOPSIG(status) != SIGTRAP) {
        ptrace(PTRACE_DETACH, tid, 0, 0);  // a job-control stop: leave it stopped
        fail("process %d is being stopped (job control): continue it first", target_pid);
      }
      break;
    }
    if ((status >> 16) != 0) {  // another ptrace event: let it go on
      ptrace(PTRACE_CONT, tid, 0, 0);
      continue;
    }
    ptrace(PTRACE_CONT, tid, 0, WSTOPSIG(status));  // the program's own signal
  }
  if (ptrace(PTRACE_GETREGS, tid, 0, &thread->regs) != 0 ||
      ptrace(PTRACE_GETFPREGS, tid, 0, &thread->fpregs) != 0) {
    ptrace(PTRACE_DETACH, tid, 0, 0);
    return false;
  }
  return true;
}

// Lets the thread go on; the kernel restarts its system call from `regs`.
static void release(struct stopped *thread) {
  ptrace(PTRACE_SETREGS, thread->tid, 0, &thread->regs);
  ptrace(PTRACE_DETACH, thread->tid, 0, thread->pending_signal);
}

static void release_and_fail(struct stopped *thread, const char *format, ...)
    __attribute__((format(printf, 2, 3), noreturn));
static void release_and_fail(struct stopped *thread, const char *format, ...) {
  release(thread);
  va_list args;
  va_start(args, format);
  vfail(format, args);
}

// One system call made by the stopped thread at `instruction` (a syscall
// instruction in its text), run between the two system-call stops of
// PTRACE_SYSCALL (not single-stepped: a trap flag would outlive a killed
// injector). The thread's registers are restored afterwards.
static long remote_syscall(struct stopped *thread, uint64_t instruction, long number, uint64_t a1,
                           uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6) {
  struct user_regs_struct regs = thread->regs;
  regs.rax = (uint64_t)number;
  regs.orig_rax = (uint64_t)-1;  // no restart of the interrupted call now
  regs.rip = instruction;
  regs.rdi = a1;
  regs.rsi = a2;
  regs.rdx = a3;
  regs.r10 = a4;
  regs.r8 = a5;
  regs.r9 = a6;
  if (ptrace(PTRACE_SETREGS, thread->tid, 0, &regs) != 0) return -ESRCH;
  long result = -EIO;
  int syscall_stops = 0;
  for (int attempts = 0; attempts < 100 && syscall_stops < 2; attempts++) {
    if (ptrace(PTRACE_SYSCALL, thread->tid, 0, 0) != 0) return -ESRCH;
    int status;
    if (wait_stop(thread->tid, &status, 2000) != 0) return -ESRCH;
    if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
      syscall_stops++;
    } else if ((status >> 16) == 0 && thread->pending_signal == 0) {
      thread->pending_signal = WSTOPSIG(status);  // delivered when we let go
    }
  }
  struct user_regs_struct after;
  if (ptrace(PTRACE_GETREGS, thread->tid, 0, &after) != 0) return -ESRCH;
  if (syscall_stops == 2 && after.rip == instruction + 2) result = (long)after.rax;
  if (ptrace(PTRACE_SETREGS, thread->tid, 0, &thread->regs) != 0) return -ESRCH;
  return result;
}

// ---------------------------------------------------------------- target memory

static bool write_memory(uint64_t address, const void *data, size_t size) {
  struct iovec local = {(void *)data, size}, remote = {(void *)address, size};
  if (process_vm_writev(target_pid, &local, 1, &remote, 1, 0) == (ssize_t)size) return true;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/mem", target_pid);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = pwrite(fd, data, size, (off_t)address) == (ssize_t)size;
  close(fd);
  return ok;
}

static bool read_memory(uint64_t address, void *data, size_t size) {
  struct iovec local = {data, size}, remote = {(void *)address, size};
  return process_vm_readv(target_pid, &local, 1, &remote, 1, 0) == (ssize_t)size;
}

// A code page left by an earlier injection: anonymous, r-x, one page, our bytes.
static uint64_t find_code_page(const unsigned char *code, size_t size, long page_size) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", target_pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) return 0;
  uint64_t found = 0;
  unsigned char *bytes = malloc(size);
  while (found == 0 && bytes != NULL && fgets(line, sizeof line, maps) != NULL) {
    unsigned long start, end, offset, inode;
    char perms[8];
    unsigned major, minor;
    if (sscanf(line, "%lx-%lx %7s %lx %x:%x %lu", &start, &end, perms, &offset, &major, &minor,
               &inode) != 7) {
      continue;
    }
    if (end - start == (unsigned long)page_size && strcmp(perms, "r-xp") == 0 && inode == 0 &&
        read_memory(start, bytes, size) && memcmp(bytes, code, size) == 0) {
      found = start;
    }
  }
  free(bytes);
  fclose(maps);
  return found;
}

// Whether [address - size, address) lies in one writable mapping (a thread's stack).
static bool stack_has_room(uint64_t address, uint64_t size) {
  char path[64], line[512];
  snprintf(path, sizeof path, "/proc/%d/maps", target_pid);
  FILE *maps = fopen(path, "re");
  if (maps == NULL) return false;
  bool room = false;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long start, end;
    char perms[8];
    if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) != 3) continue;
    if (start < address && address <= end) {
      bool grows = strstr(line, "[stack]") != NULL;  // the main thread's grows on demand
      room = perms[0] == 'r' && perms[1] == 'w' && (grows || address - start >= size);
      break;
    }
  }
  fclose(maps);
  return room;
}

// ---------------------------------------------------------------- choosing a thread

// The thread to borrow: one blocked in a restartable wait, else one running in
// user space (it holds no pending-call lock unless it is running pending calls).
static bool choose_thread(struct stopped *thread) {
  static pid_t tids[MAX_THREADS];
  for (int round = 0; round < 200; round++) {
    size_t count = list_threads(tids);
    for (int pass = 0; pass < 2; pass++) {
      for (size_t i = 0; i < count; i++) {
        long state = thread_syscall(tids[i]);
        bool wanted =
            pass == 0 ? state >= 0 && restartable_wait(state) : state == -2 && round >= 20;
        if (!wanted || !seize(tids[i], thread)) continue;
        long in_call = (long)thread->regs.orig_rax;
        if (in_call < 0 ? pass == 1 : restartable_wait(in_call)) return true;
        release(thread);  // it moved on to a call we must not interrupt
      }
    }
    usleep(5000);  // a busy program: waits come and go
  }
  return false;
}

// How the kernel would have gone on from this stop: a system call interrupted
// with -ERESTART* is issued again (rax = its number, rip back on `syscall`).
static void emulate_restart(struct user_regs_struct *regs) {
  long number = (long)regs->orig_rax, rax = (long)regs->rax;
  if (number < 0) return;
  if (rax == -512 || rax == -513 || rax == -514) {  // ERESTARTSYS, NOINTR, NOHAND
    regs->rax = (uint64_t)number;
    regs->rip -= 2;
  } else if (rax == -516) {  // ERESTART_RESTARTBLOCK
    regs->rax = SYS_restart_syscall;
    regs->rip -= 2;
  }
  regs->orig_rax = (uint64_t)-1;
}

// ---------------------------------------------------------------- main

static uint64_t parse_address(const char *text, const char *what) {
  char *end;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 16);
  if (errno != 0 || *end != '\0' || value == 0) fail("bad %s address: %s", what, text);
  return value;
}

int main(int argc, char **argv) {
  if (argc != 6 && argc != 8) {
    fprintf(stderr,
            "usage: %s PID ADD_PENDING_CALL RUN_SIMPLE_STRING SYSCALL_INSTRUCTION CODE "
            "[FAIL_AT PAUSE_AT]\n",
            argv[0]);
    return 2;
  }
  if (argc == 8) {
    fail_at = argv[6];
    pause_at = argv[7];
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  target_pid = (pid_t)atoi(argv[1]);
  uint64_t add_pending_call = parse_address(argv[2], "Py_AddPendingCall");
  uint64_t run_simple_string = parse_address(argv[3], "PyRun_SimpleString");
  uint64_t syscall_instruction = parse_address(argv[4], "syscall instruction");
  const char *code = argv[5];
  long page_size = sysconf(_SC_PAGESIZE);
  size_t code_size = strlen(code) + 1;
  if (target_pid <= 0) fail("bad process id: %s", argv[1]);
  if (CODE_OFFSET + code_size > (size_t)page_size) fail("the code is longer than a page");
  const char *placeholder = strstr(code, "0x0000000000000000");
  if (placeholder == NULL) fail("the code has no place for its page's address");

  // Attach's death (even SIGKILL) tells us to give up between two steps.
  signal(SIGUSR1, on_parent_gone);
  prctl(PR_SET_PDEATHSIG, SIGUSR1);
  if (getppid() == 1) parent_gone = 1;

  unsigned char instruction[2];
  if (!read_memory(syscall_instruction, instruction, sizeof instruction)) {
    fail("cannot read the memory of process %d: %s", target_pid, strerror(errno));
  }
  if (instruction[0] != 0x0f || instruction[1] != 0x05) {
    fail(
        "no system call instruction at 0x%llx in process %d: its files changed since it "
        "started?",
        (unsigned long long)syscall_instruction, target_pid);
  }

  struct stopped thread;
  if (!choose_thread(&thread)) {
    fail(
        "no thread of process %d came to a point where it could be interrupted safely (all "
        "busy in locks or epoll); nothing was changed",
        target_pid);
  }
  if (should_stop(STAGE_SEIZED)) release_and_fail(&thread, "stopped at stage seized");

  uint64_t sp = thread.regs.rsp;
  uint64_t slot = sp - SLOT_BELOW_SP;
  uint64_t area_address = (slot - sizeof(struct save_area)) & ~(uint64_t)15;
  if (!stack_has_room(sp, sp - area_address + 16384)) {
    release_and_fail(&thread, "thread %d's stack has no room for the call", thread.tid);
  }

  long data = remote_syscall(&thread, syscall_instruction, SYS_mmap, 0, (uint64_t)page_size,
                             PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0);
  if (data < 0 && data > -4096)
    release_and_fail(&thread, "mmap in the target: %s", strerror(-data));
  uint64_t data_page = (uint64_t)data;
  char *page = calloc(1, (size_t)page_size);
  if (page == NULL) release_and_fail(&thread, "out of memory");
  memcpy(page + CODE_OFFSET, code, code_size);
  char address_text[19];
  snprintf(address_text, sizeof address_text, "0x%016llx", (unsigned long long)data_page);
  memcpy(page + CODE_OFFSET + (placeholder - code), address_text, 18);
  if (!write_memory(data_page, page, (size_t)page_size)) {
    release_and_fail(&thread, "cannot write the target's memory: %s", strerror(errno));
  }
  if (should_stop(STAGE_DATA_PAGE)) release_and_fail(&thread, "stopped at stage data-page");

  size_t trampoline_size = (size_t)(pinsight_trampoline_end - pinsight_trampoline_begin);
  uint64_t code_page = find_code_page(pinsight_trampoline_begin, trampoline_size, page_size);
  if (code_page == 0) {
    long mapped =
        remote_syscall(&thread, syscall_instruction, SYS_mmap, 0, (uint64_t)page_size,
                       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0);
    if (mapped < 0 && mapped > -4096) {
      release_and_fail(&thread, "mmap in the target: %s", strerror(-mapped));
    }
    code_page = (uint64_t)mapped;
    if (!write_memory(code_page, pinsight_trampoline_begin, trampoline_size)) {
      release_and_fail(&thread, "cannot write the target's memory: %s", strerror(errno));
    }
    long protected = remote_syscall(&thread, syscall_instruction, SYS_mprotect, code_page,
                                    (uint64_t)page_size, PROT_READ | PROT_EXEC, 0, 0, 0);
    if (protected != 0) release_and_fail(&thread, "mprotect in the target: %ld", protected);
  }
  if (should_stop(STAGE_CODE_PAGE)) release_and_fail(&thread, "stopped at stage code-page");

  struct user_regs_struct resume = thread.regs;
  emulate_restart(&resume);
  struct save_area area = {
      .function = add_pending_call,
      .arg0 = run_simple_string,
      .arg1 = data_page + CODE_OFFSET,
      .result = data_page + RESULT_RC,
      .slot = slot,
      .rflags = resume.eflags,
      .rax = resume.rax,
      .rcx = resume.rcx,
      .rdx = resume.rdx,
      .rsi = resume.rsi,
      .rdi = resume.rdi,
      .r8 = resume.r8,
      .r9 = resume.r9,
      .r10 = resume.r10,
      .r11 = resume.r11,
      .rbp = resume.rbp,
      .r12 = resume.r12,
      .r13 = resume.r13,
      .r14 = resume.r14,
      .r15 = resume.r15,
  };
  _Static_assert(sizeof thread.fpregs == sizeof area.fxsave, "an FXSAVE image");
  memcpy(area.fxsave, &thread.fpregs, sizeof area.fxsave);
  uint64_t return_slot[2] = {resume.rip, resume.rbx};
  if (!write_memory(area_address, &area, sizeof area) ||
      !write_memory(slot, return_slot, sizeof return_slot)) {
    release_and_fail(&thread, "cannot write the target's stack: %s", strerror(errno));
  }
  if (should_stop(STAGE_STACK_WRITTEN)) release_and_fail(&thread, "stopped at stage stack-written");

  // The hand-over: one register write, then the thread no longer needs us.
  struct user_regs_struct jump = thread.regs;
  jump.rip = code_page + (uint64_t)(pinsight_trampoline_entry - pinsight_trampoline_begin);
  jump.rsp = area_address;
  jump.orig_rax = (uint64_t)-1;
  if (ptrace(PTRACE_SETREGS, thread.tid, 0, &jump) != 0) {
    release_and_fail(&thread, "cannot set thread %d's registers: %s", thread.tid, strerror(errno));
  }
  ptrace(PTRACE_DETACH, thread.tid, 0, thread.pending_signal);
  should_stop(STAGE_RELEASED);

  // The trampoline marks the data page done right after Py_AddPendingCall.
  uint64_t result[2] = {0, 0};
  long deadline = monotonic_ms() + 10000;
  while (monotonic_ms() < deadline) {
    if (!read_memory(data_page, result, sizeof result)) {
      fail("process %d exited before the call was queued", target_pid);
    }
    if (result[1] == DONE_MARK) break;
    usleep(500);
  }
  if (result[1] != DONE_MARK) {
    fail("thread %d of process %d did not finish queueing the call within 10 s", thread.tid,
         target_pid);
  }
  printf("ok tid=%d page=0x%llx rc=%lld\n", thread.tid, (unsigned long long)data_page,
         (long long)result[0]);
  return 0;
}

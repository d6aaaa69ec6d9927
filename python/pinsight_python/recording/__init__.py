"""Recording: LTTng sessions and the processes they record.

``lttng`` (LTTng's command-line client: session daemon, sessions, channels, relay
daemon), ``run`` (one ``pinsight-python trace`` run), ``injection`` and
``elf_symbols`` (attach's request into a running interpreter), ``native_files`` (the
shared objects installed beside the extension). May import ``activation`` (the
settings) and ``reading`` (the closing summary); never imported by ``reading``.
"""

"""Recording: LTTng sessions and the processes they record.

``lttng`` (LTTng's session control: session daemon, sessions, channels, process
tracking), ``relayd`` (the relay daemon a session may stream to), ``run`` (one
``pinsight-python trace`` run), ``attach`` (``pinsight-python attach`` and ``detach``),
``target`` (a running interpreter checked before anything touches it), ``injection``
and ``elf_symbols`` (a request into it), ``native_files`` (the shared objects installed
beside the extension). May import ``activation`` (the settings) and ``reading`` (the
closing summary); never imported by ``reading`` or ``activation``.
"""

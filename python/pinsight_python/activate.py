# pinsight-python startup file: point PYTHONSTARTUP at this file (its path is
# printed by `pinsight-python startup-file`) to trace Python programs unchanged:
#
#     PYTHONSTARTUP=$(pinsight-python startup-file) python sim.py
#
# CPython itself runs PYTHONSTARTUP only in interactive sessions; for scripts,
# -m modules and -c commands, pinsight_python.pth (installed in site-packages)
# sees PYTHONSTARTUP naming this file and activates at interpreter start. Here,
# in an interactive session, tracing is then already active and this does
# nothing; without the .pth (python -S, package on PYTHONPATH), this activates.
#
# It runs in the interactive session's namespace: it leaves no names there.
__import__("pinsight_python.activation.startup", fromlist=["run_startup_file"]).run_startup_file()

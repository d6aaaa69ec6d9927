"""``python -m pinsight_python [options] (script.py | -m module | -c command) [args...]``.

Runs the program traced, as ``python script.py args...`` would run it. This module
runs in the real ``__main__`` namespace, which the runner hands over to the program,
so everything lives in ``activation.startup``.
"""

import sys

from pinsight_python.activation.startup import python_m_main

python_m_main(sys.argv[1:])

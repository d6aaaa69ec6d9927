"""One ``pinsight-python trace`` run.

``keeper``: both ends of the keeper protocol (a process of the run asking to be
recorded; the keeper that tracks it) and the list of processes that could not be.
Imports nothing here: the API imports ``keeper`` in every traced process.
"""

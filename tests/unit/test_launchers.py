"""Who a traced process is for process_info: its MPI rank and size, read from the
launcher's variables (Open MPI, PMIx, MPICH's and Intel MPI's Hydra, MVAPICH, an srun
step), never from MPI_Init (docs/mpi.md). The package alone; tests/integration/test_mpi.py
runs real jobs.
"""

from __future__ import annotations

from typing import Dict, Iterator, Tuple

import pytest

from pinsight_python.activation import api

LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK",
                      "PMI_SIZE", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "SLURM_PROCID",
                      "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS")


@pytest.fixture
def clean_launcher_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    yield monkeypatch


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, (-1, -1)),
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4", "PMIX_RANK": "2"}, (2, 4)),
        # MPICH / Intel MPI (Hydra), srun --mpi=pmi2
        ({"PMI_RANK": "5", "PMI_SIZE": "8"}, (5, 8)),
        # srun --mpi=pmix: PMIx exports no size, the step does
        ({"PMIX_RANK": "1", "SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "3",
          "SLURM_NTASKS": "16"}, (1, 3)),
        ({"MV2_COMM_WORLD_RANK": "0", "MV2_COMM_WORLD_SIZE": "2"}, (0, 2)),
        ({"SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "8"}, (3, 4)),
        # A batch script's shell, not a task of an srun step
        ({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}, (-1, -1)),
        # Sizes are never taken from another launcher's variables
        ({"PMI_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"}, (1, -1)),
        # Inconsistent or unreadable values
        ({"PMI_RANK": "4", "PMI_SIZE": "4"}, (4, -1)),
        ({"PMI_RANK": "x", "PMI_SIZE": "4", "MV2_COMM_WORLD_RANK": "1",
          "MV2_COMM_WORLD_SIZE": "2"}, (1, 2)),
    ],
)
def test_rank_and_size_from_launcher_environment(
    clean_launcher_env: pytest.MonkeyPatch, env: Dict[str, str], expected: Tuple[int, int]
) -> None:
    for name, value in env.items():
        clean_launcher_env.setenv(name, value)
    assert api._mpi_rank_and_size() == expected

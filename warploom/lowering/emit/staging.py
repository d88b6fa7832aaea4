"""Staging an accumulator's rows in swizzled smem for a TMA store: the cut of a thread's row into the runs one st.shared
writes, shared by the GEMM's C epilogue (gemm.py `_store_staged`) and the attention's O epilogue (attention.py
`_store_out`).

    for run in granule_runs(columns, elem_bytes):   # columns: (value index, column) of one row, ascending
        ...one st.shared of the run's packed 16-bit pairs at the swizzled address of its first column

A run stays inside one 16-byte granule because the 128B swizzle moves whole granules: the swizzle of the run's first
byte is the swizzle of every byte of it.
"""
from __future__ import annotations


def granule_runs(columns, elem_bytes: int, granule: int = 16) -> list[list[tuple[int, int]]]:
    """A row's (value index, column) pairs, columns ascending, cut into runs of adjacent columns that stay inside one
    `granule`-byte granule of the row (what one st.shared writes), each an even number of 16-bit values from an even
    column (pairs pack into 32-bit words)."""
    runs: list[list[tuple[int, int]]] = []
    for i, col in columns:
        last = runs[-1] if runs else None
        if last and col == last[-1][1] + 1 and col * elem_bytes // granule == last[0][1] * elem_bytes // granule:
            last.append((i, col))
        else:
            runs.append([(i, col)])
    for run in runs:
        if len(run) % 2 or run[0][1] % 2:
            raise ValueError(f"columns {[col for _, col in run]} do not pack into 16-bit pairs")
    return runs

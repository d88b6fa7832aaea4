"""The score atoms (issue 33: one online softmax over per-target atoms): how each target's atom set holds an MMA
accumulator as rows of scores, checked against the fragment tables (`layout.fragments.wgmma_accumulator`,
`wgmma_a_k16`: numpy arithmetic from the PTX ISA's figures, not the atoms' code) and against TMEM's one row a
thread."""
from __future__ import annotations

import numpy as np
import pytest

from warploom import targets
from warploom.layout.fragments import fragment_col, wgmma_a_k16, wgmma_accumulator
from warploom.lowering.atoms import atoms_for

N = (64, 80, 128, 176)


@pytest.mark.parametrize("n", N)
def test_wgmma_score_rows_are_the_fragments_rows(n):
    """Each (register, column) of row h of the one chunk is, in the accumulator table, row r0 + 8h and column
    fragment_col + the given column, for every thread; the rows hold every register once, columns ascending."""
    (chunk,) = atoms_for(targets.get("sm_90a")).row_chunks(n)
    rows, cols = wgmma_accumulator(n)
    assert chunk.size == n // 2 and len(chunk.rows) == 2
    seen = sorted(i for row in chunk.rows for i, _ in row)
    assert seen == list(range(n // 2))
    lanes = np.arange(128) % 32
    for h, row in enumerate(chunk.rows):
        assert [c for _, c in row] == sorted(c for _, c in row)
        for reg, col in row:
            np.testing.assert_array_equal(rows[:, reg], rows[:, 0] + 8 * h)
            np.testing.assert_array_equal(cols[:, reg], fragment_col(lanes) + col)


@pytest.mark.parametrize("n", N)
def test_wgmma_probs_land_where_the_register_a_operand_reads(n):
    """write_probs packs P into k-block t's register-A fragments: register i's two halves must be the accumulator
    registers holding the element (row, 16t + col) that wgmma_a_k16 says register i, half e, holds."""
    atoms = atoms_for(targets.get("sm_90a"))
    (chunk,) = atoms.row_chunks(n)
    rows, cols = wgmma_accumulator(n)
    a_rows, a_cols = wgmma_a_k16()

    class Pairs:                # a builder that records which registers are packed together
        i32 = "i32"

        def bitcast(self, value, ty):
            return value

    blocks = atoms.write_probs(Pairs(), None, chunk, list(range(n // 2)), lambda lo, hi: (lo, hi))
    assert len(blocks) == n // 16
    for t, block in enumerate(blocks):
        assert len(block) == 4
        for i, pair in enumerate(block):
            for e, reg in enumerate(pair):
                np.testing.assert_array_equal(rows[:, reg], a_rows[:, 2 * i + e])
                np.testing.assert_array_equal(cols[:, reg], a_cols[:, 2 * i + e] + 16 * t)


def test_tmem_row_chunks_cover_the_row_once():
    atoms = atoms_for(targets.get("sm_100a"))
    chunks = atoms.row_chunks(128, 32)
    assert [c.first for c in chunks] == [0, 32, 64, 96] and not atoms.rows_resident
    assert [col for c in chunks for (row,) in [c.rows] for _, col in row] == list(range(128))
    assert all([i for i, _ in c.rows[0]] == list(range(32)) for c in chunks)
    with pytest.raises(ValueError, match="do not split"):
        atoms.row_chunks(80, 32)


def test_epilogue_runs_are_pairs_of_a_fragment_and_granules_of_a_row():
    """The staging writes of O and C (emit.staging.granule_runs: AttentionLowering._store_out, GemmLowering.
    _store_staged): a fragment row's columns 8j, 8j + 1 are one 4-byte pair each; a TMEM row's 32 columns are four
    16-byte granules of 8 16-bit values; a run never crosses a granule."""
    from warploom.lowering.emit.staging import granule_runs
    (frag,) = atoms_for(targets.get("sm_90a")).row_chunks(64)
    runs = granule_runs(frag.rows[1], 2)
    assert [[c for _, c in r] for r in runs] == [[8 * j, 8 * j + 1] for j in range(8)]
    assert [[i for i, _ in r] for r in runs] == [[4 * j + 2, 4 * j + 3] for j in range(8)]
    (row,) = atoms_for(targets.get("sm_100a")).row_chunks(64, 32)[1].rows
    assert [[c for _, c in r] for r in granule_runs(row, 2)] == [list(range(g, g + 8)) for g in range(32, 64, 8)]
    assert [len(r) for r in granule_runs([(k, 6 + k) for k in range(4)], 2)] == [2, 2]     # 6, 7 | 8, 9
    with pytest.raises(ValueError, match="16-bit pairs"):
        granule_runs([(0, 1), (1, 2)], 2)

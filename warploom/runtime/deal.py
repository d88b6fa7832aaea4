"""The host's deal of a causal persistent attention's tiles over its CTAs: the table warploom.ops_attention uploads
for the kernel and the emulator passes it (rules.causal_tile_table's greedy deal, its head groups' K and V kept
within the target's L2; or a snake deal of one tile order, to compare deals)."""
from __future__ import annotations

from warploom import targets

from . import rules


def causal_deal(sizes: dict, block_m: int, block_n: int, ctas: int, head_dim: int, elem: str,
                target: str = "sm_90a", walked: list[int] | None = None) -> tuple[list[int], int]:
    """(the table, the head group) of rules.causal_tile_table's greedy deal of a causal persistent kernel's tiles
    over `ctas` CTAs for `sizes` (Sq, Sk, Hq, Hkv, B), its head groups' K and V kept within the target's L2;
    `walked`: each query block's key blocks under a mask modifier (`mask_walked`), else its causal count."""
    t = targets.get(target)
    kv_bytes = 2 * sizes["Sk"] * head_dim * t.elem_bits(elem) // 8          # one kv head's K and V
    return rules.causal_tile_table(sizes, block_m, block_n, ctas, kv_bytes, t.l2_bytes, walked=walked)


def causal_table(sizes: dict, block_m: int, block_n: int, ctas: int, head_dim: int, elem: str,
                 target: str = "sm_90a", order: int | None = None, walked: list[int] | None = None) -> list[int]:
    """The table ops.attention gives a causal persistent kernel: `causal_deal`'s, or with `order` the snake deal of
    that tile order."""
    if order is not None:
        return rules.snake_tile_table(sizes, block_m, block_n, ctas, order)
    return causal_deal(sizes, block_m, block_n, ctas, head_dim, elem, target, walked)[0]


def mask_walked(mods, scalars: dict, sizes: dict, block_m: int, block_n: int, causal: bool = True,
                table=None) -> list[int] | None:
    """The key blocks each query block walks under the mask modifier of `mods` (the kernel's key ranges, from
    warploom.score.bounds.block_table, with the causal mask or without), the most over heads and batches where the
    mask reads them; None without a mask. What the deal balances instead of the causal counts: a window's tiles all
    walk about the same, a prefix-LM's more the further down. A captured tensor declared non-decreasing (document
    ids) bounds the walk where `scalars` holds its values on the host (numpy), as the kernel's bounds read it; a
    tabled mask's walk is its block table's (`table`, numpy: warploom.score.table)."""
    if mods is None or mods.mask is None:
        return None
    if table is not None:                       # a tabled mask: the counts of its block table (numpy)
        from warploom.score.table import walked_blocks
        return walked_blocks(table)
    import numpy as np

    from warploom.score.bounds import block_table
    from warploom.score.trace import unwrap
    values = {n: scalars[n] for n in mods.mask.scalars()}
    ends = {n: unwrap(scalars[n]) for n in mods.sorted if isinstance(unwrap(scalars.get(n)), np.ndarray)}
    ranges = block_table(mods.mask, values, sizes["Sq"], sizes["Sk"], block_m, block_n, sizes["B"], sizes["Hq"],
                         causal, ends)["ranges"]
    return [int(x) for x in (ranges[..., 1] - ranges[..., 0]).clip(min=0).max(axis=(0, 1))]

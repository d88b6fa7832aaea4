"""`warploom explain --png FILE`: the shared-memory and Tensor Memory maps of a planned kernel, drawn with matplotlib
(an optional extra: `pip install 'warploom[plot]'`).

Each map is one horizontal band per region, offset (bytes or columns) along x: a region's stages are separate
boxes, a region placed on another's bytes (O on Q, P on S) is hatched and names its host, the limit is a line.
"""
from __future__ import annotations


def draw_maps(program, path: str) -> None:
    """Write the maps of `program` (a planned warploom.kernel.Program) to `path` (PNG)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ValueError("--png draws with matplotlib, which is not installed: pip install 'warploom[plot]' "
                         "(or pip install matplotlib)") from None
    from warploom import targets
    target = targets.get(program.target)
    spaces = [("smem", "bytes", target.smem_limit)]
    if any(r.space == "tmem" for r in program.regions.values()):
        spaces.append(("tmem", "columns", target.tmem.columns))
    fig, axes = plt.subplots(len(spaces), 1, figsize=(12, 1.2 + 0.45 * len(program.regions)), squeeze=False)
    colors = plt.get_cmap("tab10")
    for ax, (space, unit, limit) in zip(axes[:, 0], spaces):
        regions = [r for r in program.regions.values() if r.space == space and r.offset is not None]
        for row, r in enumerate(regions):
            stage = r.size // max(r.stages, 1)
            shared = bool(r.aliases)
            for s in range(r.stages):
                ax.barh(row, stage, left=r.offset + s * stage, height=0.7, color=colors(row % 10),
                        edgecolor="black", hatch="//" if shared else None, alpha=0.6 if shared else 0.9)
            label = f"{r.name}" + (f" ({r.stages} stages)" if r.stages > 1 else "") + \
                (f", on {', '.join(r.aliases)}" if shared else "")
            ax.text(r.offset + r.size, row, f"  {label}: {r.offset}..{r.offset + r.size - 1}", va="center",
                    fontsize=8)
        ax.axvline(limit, color="red", linestyle="--")
        ax.text(limit, -0.9, f"limit {limit}", color="red", fontsize=8, ha="right")
        ax.set_yticks(range(len(regions)), [r.name for r in regions])
        ax.invert_yaxis()
        ax.set_xlim(0, limit * 1.35)
        ax.set_xlabel(f"{space} {unit}")
        ax.set_title(f"{space} plan of the {program.kind} kernel ({program.target})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)

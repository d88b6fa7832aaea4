"""Layouts as values: swizzles, smem tiles, register fragments, TMEM columns, and the MMA
descriptors derived from them (encoders and decoders)."""
from warploom.layout.descriptors import (Sm100InstrDescriptor, Sm100SmemDescriptor, WgmmaSmemDescriptor,
                                        canonical_element_address)
from warploom.layout.swizzle import (SWIZZLE_32B, SWIZZLE_64B, SWIZZLE_128B, SWIZZLE_128B_BASE32B, SWIZZLE_NONE,
                                     SWIZZLES, Swizzle, swizzle)
from warploom.layout.tiling import MmaOperandLayout, SmemTile

__all__ = ["SWIZZLES", "SWIZZLE_32B", "SWIZZLE_64B", "SWIZZLE_128B", "SWIZZLE_128B_BASE32B", "SWIZZLE_NONE",
           "MmaOperandLayout", "Sm100InstrDescriptor", "Sm100SmemDescriptor", "SmemTile", "Swizzle",
           "WgmmaSmemDescriptor", "canonical_element_address", "swizzle"]

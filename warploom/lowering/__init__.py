"""Lowering of resource-assigned wl kernels to NVVM, PTX and cubins (sm_90a today)."""

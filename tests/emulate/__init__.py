"""Emulator tests: the standard kernels run on the CPU, hand-broken kernels, the H200 calibration replay."""

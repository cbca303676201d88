"""Layer 2, the GPU: everything that touches CUDA, so no other layer has to.

Opening the device and describing it (``device``), NVRTC compilation with its on-disk cache and
SASS counts (``compile``, ``cache``, ``sass``), one backend interface per kernel under measurement
(``backends``), TMA tensor maps (``tma``), guard bands around device matrices (``guards``) and
NVML clocks/throttle monitoring (``monitor``). Imports only the base and the contract.
"""

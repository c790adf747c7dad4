"""GPU sharing and fragmentation, below the plugins and the twin.

:mod:`bosun.gpu.share` is the GPU-share model (free milli-GPU per device, the default
device choice); :mod:`bosun.gpu.fragmentation` is FGD's fragmentation measure and its
incremental tracker. Both import only :mod:`bosun.api` and :mod:`bosun.framework`, so the
FGD plugin, the twin's metrics and the RL features all read them from here.
"""

"""The device's roofs: measured dense-matmul throughput per precision and DRAM copy bandwidth, beside the vendor's
datasheet peaks (:mod:`accelbench.ceilings.measure`), measured once per device and cached in the store's
``ceilings`` table (:mod:`accelbench.ceilings.cache`).

Every scenario that places a step under a roof asks here: ``accelbench profile`` (its roofline), ``accelbench
generate`` (MBU and MFU) and :func:`accelbench.api.ceilings`. A precision names its roof (``Precision.ceiling``, one
of :data:`accelbench.precisions.ROOFS`).
"""

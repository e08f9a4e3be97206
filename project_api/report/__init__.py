"""Reports made from what the device and the build measured: the per-operator profile
(:mod:`.profile`) and the one-file HTML page that shows it with the footprint (:mod:`.html`)."""

"""What this project knows about CMSIS-NN itself, in one place, below the stages that use it.

    release.py    a CMSIS-NN tree read: its release, and the API facts of each release
                  (argument structs, buffer-size functions) that the adapter relies on
    calls.py      the CMSIS-NN calls found in a model's C (TVM's or ours), with their sites
    adapter.py    the adapter between TVM 0.14's calls and a newer release's API, and the
                  scratch each adapted call takes from its operator's workspace
    sources.py    which of a tree's files the calls reach, and how they compile
    features.py   the CPU features (DSP, MVE) a model's target assumed, and the build level
                  CMSIS-NN is compiled at to match them

Standard library and ``read.ctext`` only: ``resolve`` (fetching and building CMSIS-NN),
``generate`` (planning a firmware around it), ``compile`` (asking it buffer sizes) and ``cli``
use these modules; none of them is imported here.
"""

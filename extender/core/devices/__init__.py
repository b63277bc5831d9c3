"""Devices of Dynamic Resource Allocation: the model read from ResourceSlices,
DeviceClasses and claims (`model`), and whether a node's free devices can satisfy a
pod's claims, and with which devices (`allocate`). Selectors are evaluated by the
`SelectorCompiler` the core is given (the adapter `extender/cel_selectors.py`)."""

"""The speed-of-light tier (`--speed`), one module per part.

tier (run_speed: the children planned, started and stopped within the bound, the section
assembled; replay), process (a child speaking JSON lines, the NVML sampler, contention), figures
(the children's raw timings into the record's figures), cuda (libcuda through ctypes: devices,
events, copies, the PTX kernel), driver_child (the driver-API child's main), torch_child (the torch
child's source, run under the host's training python).

Nothing is imported here: the driver-API child loads cuda and driver_child only.
"""

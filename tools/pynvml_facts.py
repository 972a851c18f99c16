#!/usr/bin/env python3
"""What pynvml answers on this host for the queries of the planned PCIe / NVLink / fabric /
temperature checks: one line a query, the value or the NVML error. Read-only."""
import pynvml as N


def ask(label, fn, *args):
    try:
        value = fn(*args)
        if hasattr(value, "_fields_"):
            value = {f[0]: getattr(value, f[0]) for f in value._fields_}
        print("%s: %r" % (label, value))
    except N.NVMLError as exc:
        print("%s: %s (%s)" % (label, type(exc).__name__, exc))
    except Exception as exc:  # a binding absent from this pynvml, or a bad argument
        print("%s: %s: %s" % (label, type(exc).__name__, exc))


def main():
    N.nvmlInit()
    print("pynvml %s, driver %s, NVML %s" % (getattr(N, "__version__", "?"), N.nvmlSystemGetDriverVersion(),
                                             N.nvmlSystemGetNVMLVersion()))
    for i in range(N.nvmlDeviceGetCount()):
        h = N.nvmlDeviceGetHandleByIndex(i)
        print("== GPU %d %s" % (i, N.nvmlDeviceGetUUID(h)))
        if hasattr(N, "c_nvmlGpuFabricInfo_t"):  # this binding fills a struct the caller passes
            ask("GpuFabricInfo", lambda h, s=N.c_nvmlGpuFabricInfo_t(): (N.nvmlDeviceGetGpuFabricInfo(h, s), s)[1], h)
        for name in ("CurrPcieLinkGeneration", "CurrPcieLinkWidth", "MaxPcieLinkGeneration", "MaxPcieLinkWidth",
                     "GpuMaxPcieLinkGeneration", "PcieReplayCounter", "PcieLinkMaxSpeed", "PcieSpeed"):
            ask(name, getattr(N, "nvmlDeviceGet" + name, None), h)
        for name, const in (("PCIe TX KB/s", "NVML_PCIE_UTIL_TX_BYTES"), ("PCIe RX KB/s", "NVML_PCIE_UTIL_RX_BYTES")):
            ask(name, N.nvmlDeviceGetPcieThroughput, h, getattr(N, const))
        for link in range(getattr(N, "NVML_NVLINK_MAX_LINKS", 18)):
            ask("NvLinkState[%d]" % link, N.nvmlDeviceGetNvLinkState, h, link)
        for link in range(2):
            for cname in ("NVML_NVLINK_ERROR_DL_REPLAY", "NVML_NVLINK_ERROR_DL_RECOVERY", "NVML_NVLINK_ERROR_DL_CRC_FLIT",
                          "NVML_NVLINK_ERROR_DL_CRC_DATA", "NVML_NVLINK_ERROR_DL_ECC_DATA"):
                if hasattr(N, cname):
                    ask("NvLinkErrorCounter[%d].%s" % (link, cname[len("NVML_NVLINK_ERROR_"):]), N.nvmlDeviceGetNvLinkErrorCounter, h, link,
                        getattr(N, cname))
            ask("NvLinkVersion[%d]" % link, N.nvmlDeviceGetNvLinkVersion, h, link)
            ask("NvLinkRemotePciInfo[%d].busId" % link, lambda h, l: N.nvmlDeviceGetNvLinkRemotePciInfo(h, l).busId, h, link)
        for cname in ("NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN",
                      "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX",
                      "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN", "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_CURR",
                      "NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MAX", "NVML_TEMPERATURE_THRESHOLD_GPS_CURR"):
            if hasattr(N, cname):
                ask("TemperatureThreshold.%s" % cname[len("NVML_TEMPERATURE_THRESHOLD_"):], N.nvmlDeviceGetTemperatureThreshold, h, getattr(N, cname))
        ask("Temperature.GPU", N.nvmlDeviceGetTemperature, h, N.NVML_TEMPERATURE_GPU)
        fields = [(n, getattr(N, n)) for n in ("NVML_FI_DEV_MEMORY_TEMP", "NVML_FI_DEV_NVLINK_LINK_COUNT",
                                               "NVML_FI_DEV_PCIE_REPLAY_COUNTER", "NVML_FI_DEV_PERF_POLICY_THERMAL",
                                               "NVML_FI_DEV_PCIE_COUNT_CORRECTABLE_ERRORS",
                                               "NVML_FI_DEV_NVLINK_ERROR_DL_CRC", "NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY")
                  if hasattr(N, n)]
        try:
            for (n, _), v in zip(fields, N.nvmlDeviceGetFieldValues(h, [f for _, f in fields])):
                val = {0: v.value.dVal, 1: v.value.uiVal, 2: v.value.ulVal, 3: v.value.ullVal, 4: v.value.sllVal,
                       5: v.value.siVal}.get(v.valueType, "?") if v.nvmlReturn == 0 else None
                print("FieldValue.%s: nvmlReturn=%d value=%r" % (n[8:], v.nvmlReturn, val))
        except Exception as exc:
            print("FieldValues: %s: %s" % (type(exc).__name__, exc))
        ask("GpcClkMinMaxVfOffset", getattr(N, "nvmlDeviceGetGpcClkMinMaxVfOffset", None), h)
        ask("ClockOffsets", getattr(N, "nvmlDeviceGetClockOffsets", None), h)
        for cname in ("NVML_CLOCK_SM", "NVML_CLOCK_MEM"):
            ask("MinMaxClockOfPState.%s" % cname, getattr(N, "nvmlDeviceGetMinMaxClockOfPState", None), h,
                getattr(N, cname), 0)
        ask("ApplicationsClock.SM", N.nvmlDeviceGetApplicationsClock, h, N.NVML_CLOCK_SM)
        ask("ApplicationsClock.MEM", N.nvmlDeviceGetApplicationsClock, h, N.NVML_CLOCK_MEM)
        ask("LockedClocks (nvmlDeviceGetClock SM/CUSTOMER_BOOST_MAX)", N.nvmlDeviceGetClock, h, N.NVML_CLOCK_SM,
            getattr(N, "NVML_CLOCK_ID_CUSTOMER_BOOST_MAX", 3))
        ask("GpuOperationMode", getattr(N, "nvmlDeviceGetGpuOperationMode", None), h)
        ask("PerformanceModes", getattr(N, "nvmlDeviceGetPerformanceModes", None), h)
    N.nvmlShutdown()


if __name__ == "__main__":
    main()

#include "core/gpu_stats.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace kipp {
namespace {

// The few NVML declarations used, from NVIDIA's documented C API (nvml.h is not installed with
// the toolkit). Return codes are a C enum, int-sized.
using NvmlReturn = int;
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned kNvmlNameBufferSize = 96;                  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlProcessInfo {  // nvmlProcessInfo_t (v2/v3 layout)
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

struct NvmlApi {
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*handle_by_uuid)(const char*, NvmlDevice*) = nullptr;
  NvmlReturn (*name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*) = nullptr;
  // Optional (drivers before the v3 entry point): memory is then device-wide.
  NvmlReturn (*compute_processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
};

template <typename Function>
void resolve(void* library, const char* symbol, Function& slot, std::string& missing) {
  slot = reinterpret_cast<Function>(dlsym(library, symbol));
  if (slot == nullptr && missing.empty()) missing = symbol;
}

}  // namespace

const char* gpu_memory_scope_name(GpuMemoryScope scope) {
  return scope == GpuMemoryScope::Process ? "process" : "device";
}

Expected<GpuSelector> parse_visible_devices(const char* value) {
  GpuSelector selector;
  if (value == nullptr) return selector;
  std::string_view list(value);
  const std::string_view first = list.substr(0, list.find(','));
  if (first.empty()) {
    if (!list.empty()) return make_error("CUDA_VISIBLE_DEVICES=" + std::string(list) + ": empty first entry");
    return selector;
  }
  if (first.substr(0, 4) == "GPU-") {
    selector.by_uuid = true;
    selector.uuid = std::string(first);
    return selector;
  }
  const std::string text(first);
  char* end = nullptr;
  errno = 0;
  const unsigned long index = std::strtoul(text.c_str(), &end, 10);
  if (text[0] < '0' || text[0] > '9' || *end != '\0' || errno != 0 || index > 0xffffu) {
    return make_error("CUDA_VISIBLE_DEVICES=" + std::string(list) + ": first entry " + text +
                      " is neither a device number nor a GPU-<uuid> (MIG devices are not supported)");
  }
  selector.index = static_cast<unsigned>(index);
  return selector;
}

struct GpuStats::Device {
  void* library = nullptr;
  NvmlApi api;
  bool initialized = false;
  NvmlDevice handle = nullptr;
  std::string name;
  uint64_t peak_process = 0;
  uint64_t peak_device = 0;
  std::vector<NvmlProcessInfo> processes = std::vector<NvmlProcessInfo>(64);

  ~Device() {
    if (initialized) api.shutdown();
    if (library != nullptr) dlclose(library);
  }

  Error failure(const char* call, NvmlReturn code) const {
    const char* text = api.error_string != nullptr ? api.error_string(code) : nullptr;
    return make_error(std::string("NVML ") + call + ": " + (text != nullptr ? text : "error " + std::to_string(code)));
  }

  // This process's memory on the device as NVML lists it; nothing when it is not listed.
  std::optional<uint64_t> process_memory() {
    if (api.compute_processes == nullptr) return std::nullopt;
    unsigned count = static_cast<unsigned>(processes.size());
    NvmlReturn code = api.compute_processes(handle, &count, processes.data());
    if (code == kNvmlInsufficientSize) {
      processes.resize(static_cast<size_t>(count) + 16);  // room for processes that start meanwhile
      count = static_cast<unsigned>(processes.size());
      code = api.compute_processes(handle, &count, processes.data());
    }
    if (code != kNvmlSuccess) return std::nullopt;
    const auto self = static_cast<unsigned>(getpid());
    std::optional<uint64_t> used;
    for (size_t i = 0; i < std::min<size_t>(count, processes.size()); ++i) {
      const NvmlProcessInfo& info = processes[i];
      if (info.pid != self || info.usedGpuMemory == kNvmlValueNotAvailable) continue;
      used = used.value_or(0) + info.usedGpuMemory;
    }
    return used;
  }
};

GpuStats::GpuStats(std::unique_ptr<Device> device) : device_(std::move(device)) {}
GpuStats::GpuStats(GpuStats&&) noexcept = default;
GpuStats& GpuStats::operator=(GpuStats&&) noexcept = default;
GpuStats::~GpuStats() = default;

Expected<GpuStats> GpuStats::open(std::string_view library_name) {
  KIPP_ASSIGN_OR_RETURN(const GpuSelector selector, parse_visible_devices(std::getenv("CUDA_VISIBLE_DEVICES")));
  auto device = std::make_unique<Device>();
  const std::string name(library_name);
  device->library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (device->library == nullptr) {
    const char* why = dlerror();
    return make_error("cannot open " + name +
                      " (NVML, installed with the NVIDIA driver): " + (why != nullptr ? why : "not found"));
  }
  NvmlApi& api = device->api;
  std::string missing;
  resolve(device->library, "nvmlInit_v2", api.init, missing);
  resolve(device->library, "nvmlShutdown", api.shutdown, missing);
  resolve(device->library, "nvmlErrorString", api.error_string, missing);
  resolve(device->library, "nvmlDeviceGetHandleByIndex_v2", api.handle_by_index, missing);
  resolve(device->library, "nvmlDeviceGetHandleByUUID", api.handle_by_uuid, missing);
  resolve(device->library, "nvmlDeviceGetName", api.name, missing);
  resolve(device->library, "nvmlDeviceGetUtilizationRates", api.utilization, missing);
  resolve(device->library, "nvmlDeviceGetMemoryInfo", api.memory, missing);
  if (!missing.empty()) return make_error(name + " has no function " + missing);
  std::string optional_missing;
  resolve(device->library, "nvmlDeviceGetComputeRunningProcesses_v3", api.compute_processes, optional_missing);

  if (const NvmlReturn code = api.init(); code != kNvmlSuccess) return device->failure("nvmlInit", code);
  device->initialized = true;
  const NvmlReturn found = selector.by_uuid ? api.handle_by_uuid(selector.uuid.c_str(), &device->handle)
                                            : api.handle_by_index(selector.index, &device->handle);
  if (found != kNvmlSuccess) {
    const std::string which = selector.by_uuid ? selector.uuid : "index " + std::to_string(selector.index);
    const char* call = selector.by_uuid ? "nvmlDeviceGetHandleByUUID" : "nvmlDeviceGetHandleByIndex";
    return make_error(device->failure(call, found).message + " (" + which + ")");
  }
  char text[kNvmlNameBufferSize] = {};
  if (const NvmlReturn code = api.name(device->handle, text, sizeof text); code != kNvmlSuccess) {
    return device->failure("nvmlDeviceGetName", code);
  }
  text[sizeof text - 1] = '\0';
  device->name = text;
  return GpuStats(std::move(device));
}

Expected<GpuSample> GpuStats::sample() {
  Device& d = *device_;
  NvmlUtilization utilization{};
  if (const NvmlReturn code = d.api.utilization(d.handle, &utilization); code != kNvmlSuccess) {
    return d.failure("nvmlDeviceGetUtilizationRates", code);
  }
  NvmlMemory memory{};
  if (const NvmlReturn code = d.api.memory(d.handle, &memory); code != kNvmlSuccess) {
    return d.failure("nvmlDeviceGetMemoryInfo", code);
  }
  GpuSample sample;
  sample.name = d.name;
  sample.utilization_percent = utilization.gpu;
  sample.memory_total_bytes = memory.total;
  if (const std::optional<uint64_t> own = d.process_memory()) {
    sample.memory_scope = GpuMemoryScope::Process;
    sample.memory_used_bytes = *own;
    d.peak_process = std::max(d.peak_process, *own);
    sample.memory_peak_bytes = d.peak_process;
  } else {
    sample.memory_scope = GpuMemoryScope::Device;
    sample.memory_used_bytes = memory.used;
    d.peak_device = std::max<uint64_t>(d.peak_device, memory.used);
    sample.memory_peak_bytes = d.peak_device;
  }
  return sample;
}

}  // namespace kipp

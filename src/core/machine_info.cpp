#include "core/machine_info.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include "core/process_stats.h"

namespace kipp {
namespace {

// The value after "key<spaces>:" of a /proc line, or nothing when the line is another key.
bool proc_value(const std::string& line, const std::string& key, std::string& value) {
  if (line.compare(0, key.size(), key) != 0) return false;
  const size_t colon = line.find(':', key.size());
  if (colon == std::string::npos || line.find_first_not_of(" \t", key.size()) != colon) return false;
  const size_t start = line.find_first_not_of(' ', colon + 1);
  value = start == std::string::npos ? std::string() : line.substr(start);
  return true;
}

std::string shell_quoted(const std::string& argument) {
  if (!argument.empty() && argument.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                      "0123456789-_./=,:+@%") == std::string::npos)
    return argument;
  std::string quoted = "'";
  for (char c : argument) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

}  // namespace

MachineInfo read_machine_info() {
  MachineInfo info;
  info.cpu_model = "unknown";
  info.hardware_threads = hardware_thread_count();
  std::string flags_line;
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, value;
  std::string family, model, stepping;
  // The first processor's block holds every key; the loop ends at the blank line after it.
  while (std::getline(cpuinfo, line) && !line.empty()) {
    if (proc_value(line, "model name", value)) {
      info.cpu_model = value;
    } else if (proc_value(line, "cpu family", value)) {
      family = value;
    } else if (proc_value(line, "model", value)) {
      model = value;
    } else if (proc_value(line, "stepping", value)) {
      stepping = value;
    } else if (proc_value(line, "flags", value)) {
      flags_line = " " + value + " ";
    }
  }
  if (!family.empty() && !model.empty())
    info.cpu_signature = "family " + family + " model " + model + (stepping.empty() ? "" : " stepping " + stepping);
  for (const char* flag : {"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni"})
    info.flags.emplace_back(flag, flags_line.find(" " + std::string(flag) + " ") != std::string::npos);

  std::ifstream meminfo("/proc/meminfo");
  while (std::getline(meminfo, line)) {
    if (!proc_value(line, "MemTotal", value)) continue;
    std::istringstream in(value);
    uint64_t kilobytes = 0;
    if (in >> kilobytes) info.memory_bytes = kilobytes * 1024;
    break;
  }
  return info;
}

nlohmann::ordered_json machine_json(const MachineInfo& info) {
  nlohmann::ordered_json flags = nlohmann::ordered_json::object();
  for (const auto& [name, present] : info.flags) flags[name] = present;
  return {{"cpu", info.cpu_model},
          {"cpu_signature", info.cpu_signature},
          {"hardware_threads", info.hardware_threads},
          {"memory_bytes", info.memory_bytes},
          {"flags", flags}};
}

std::string read_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string command;
  size_t start = 0;
  while (start < raw.size()) {
    size_t end = raw.find('\0', start);
    if (end == std::string::npos) end = raw.size();
    if (!command.empty()) command += ' ';
    command += shell_quoted(raw.substr(start, end - start));
    start = end + 1;
  }
  return command;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace kipp

"""The machine facts every benchmark result records: CPU model, cores, memory, kernel, Python."""
import os
import platform


def machine_facts():
    cpu = ""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version()}

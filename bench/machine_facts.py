"""The machine facts every benchmark result records: CPU model, cores, memory, kernel, Python."""
import os
import platform


def machine_facts():
    fields = {}
    with open("/proc/cpuinfo") as f:
        for line in f:
            if not line.strip():
                break
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    cpu = fields.get("model name", "")
    signature = ""
    if "cpu family" in fields:
        signature = "family %s model %s" % (fields["cpu family"], fields.get("model", ""))
        if fields.get("stepping"):
            signature += " stepping " + fields["stepping"]
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return {"cpu": cpu, "cpu_signature": signature, "cores": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1),
            "kernel": platform.release(), "python": platform.python_version()}

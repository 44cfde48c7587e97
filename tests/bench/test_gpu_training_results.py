#!/usr/bin/python3
"""Tests for how the GPU check reads training results: bench/train_cuda_vs_torch.py's reading of a
run's metrics.jsonl and its targets, and scripts/gpu_summary.py's training figures and targets.
unittest only; no GPU and no torch needed. The inputs are written here by hand and the expected
figures worked out here from them.

Run: /usr/bin/python3 tests/bench/test_gpu_training_results.py [-v]
"""

import contextlib
import importlib.util
import io
import json
import tempfile
import unittest
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
GIB = 1 << 30


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, REPO / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load("train_cuda_vs_torch", "bench/train_cuda_vs_torch.py")
summary = load("gpu_summary", "scripts/gpu_summary.py")


def step_line(step, tps, peak=None):
    record = {"type": "step", "step": step, "time": 1.0, "loss": 10.0 - step, "tokens_per_second": tps}
    if peak is not None:
        record.update({"gpu_name": "Card", "gpu_memory_peak_bytes": peak, "gpu_memory_scope": "process"})
    return json.dumps(record) + "\n"


class MetricsParsing(unittest.TestCase):
    def test_step_lines_in_order_without_an_unfinished_last_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "metrics.jsonl"
            path.write_text('{"type":"scalars","step":0,"values":{}}\n' + step_line(1, 5.0) + "not json\n" +
                            step_line(2, 6.0) + '{"type":"step","step":3,"tokens_per', encoding="utf-8")
            steps = bench.read_steps(str(path))
            self.assertEqual([s["step"] for s in steps], [1, 2])
            self.assertEqual(bench.read_steps(str(Path(tmp) / "missing.jsonl")), [])

    def test_median_after_the_warm_up_and_the_highest_peak(self):
        lines = [step_line(1, 10.0, 3 * GIB), step_line(2, 20.0, 5 * GIB), step_line(3, 300.0, 4 * GIB),
                 step_line(4, 100.0, 4 * GIB), step_line(5, 200.0, 4 * GIB)]
        steps = [json.loads(l) for l in lines]
        run = bench.kipp_figures(steps, 2, 8, 256)
        self.assertEqual(run["tokens_per_s"], 200.0)  # median of 300, 100, 200
        self.assertEqual(run["timed_steps"], 3)
        self.assertEqual((run["tokens_per_s_min"], run["tokens_per_s_max"]), (100.0, 300.0))
        self.assertAlmostEqual(run["step_s_median"], 8 * 256 / 200.0)
        self.assertEqual(run["peak_gpu_memory_bytes"], 5 * GIB)
        self.assertEqual(run["gpu_memory_scope"], "process")
        self.assertEqual(run["final_loss"], 5.0)

    def test_no_timed_steps_and_no_gpu_fields(self):
        steps = [json.loads(step_line(1, 10.0))]
        self.assertIsNone(bench.kipp_figures(steps, 1, 8, 256))
        run = bench.kipp_figures(steps + [json.loads(step_line(2, 30.0))], 1, 8, 256)
        self.assertEqual(run["tokens_per_s"], 30.0)
        self.assertNotIn("peak_gpu_memory_bytes", run)


def bench_result():
    """A training bench result as the bench writes it, before evaluate()."""
    def case(kipp, eager=None, compile_=None, flops=1e9):
        runs = {"kipp": kipp}
        if eager is not None:
            runs["torch_eager"] = {"tokens_per_s": eager, "peak_allocated_bytes": 2 * GIB}
        if compile_ is not None:
            runs["torch_compile"] = compile_
        return {"batch": 16, "seq_len": 512, "flops_per_token": flops, "runs": runs}
    return {"peak_tflops": 1000.0, "cases": {
        "small": case({"tokens_per_s": 1300.0, "peak_gpu_memory_bytes": 9 * GIB}, 1000.0, {"tokens_per_s": 1400.0}),
        "small_6gb": case({"tokens_per_s": 600.0, "peak_gpu_memory_bytes": 5 * GIB}),
        "tiny": case({"error": "kipp: error: something"}, 50.0, {"error": "BackendCompilerFailed: no compiler"}),
    }}


class Targets(unittest.TestCase):
    def test_ratios_mfu_and_targets(self):
        result = bench_result()
        bench.evaluate(result)
        small = result["cases"]["small"]
        self.assertAlmostEqual(small["kipp_over_torch_eager"], 1.3)
        self.assertAlmostEqual(small["kipp_over_torch_compile"], 1300.0 / 1400.0)
        self.assertAlmostEqual(small["runs"]["kipp"]["mfu"], 1300.0 * 1e9 / 1e15)
        self.assertIsNone(result["cases"]["tiny"]["kipp_over_torch_eager"])
        self.assertNotIn("mfu", result["cases"]["tiny"]["runs"]["kipp"])
        self.assertEqual([t["met"] for t in result["targets"]], [True, False, True])
        self.assertAlmostEqual(result["targets"][2]["value"], 5.0)

    def test_unmeasured_targets_are_neither_met_nor_missed(self):
        result = {"peak_tflops": 1000.0, "cases": {}}
        bench.evaluate(result)
        self.assertEqual([t["met"] for t in result["targets"]], [None, None, None])


class Summary(unittest.TestCase):
    def run_summary(self, tmp, train=None, convergence=None):
        results, out = Path(tmp) / "results", Path(tmp) / "out"
        results.mkdir()
        out.mkdir()
        if train is not None:
            (results / "train_bench.json").write_text(json.dumps(train), encoding="utf-8")
        if convergence is not None:
            (results / "train_convergence.json").write_text(json.dumps(convergence), encoding="utf-8")
        (results / "gpu.csv").write_text("name, driver_version\nCard, 1.0\n", encoding="utf-8")
        steps = Path(tmp) / "steps.tsv"
        steps.write_text("cuda_train_gates\tgate\tpassed\t0\t3.0\tcuda_train_gates.log\t\n"
                         "train_resume_cuda\tgate\tfailed\t1\t9.0\ttrain_resume_cuda.log\tFAIL: differs\n"
                         "train_bench\tbench\tpassed\t0\t120.0\ttrain_bench.log\t\n", encoding="utf-8")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            rc = summary.main(["--steps", str(steps), "--results", str(results), "--bundle-info", str(Path(tmp) / "none"),
                               "--out", str(out), "--seconds", "500", "--problems", "1"])
        self.assertEqual(rc, 0)
        return json.loads((out / "summary.json").read_text(encoding="utf-8")), out, printed.getvalue()

    def test_training_figures_and_targets(self):
        train = bench_result()
        bench.evaluate(train)
        convergence = {"steps": 200, "cpu_validation_loss": 2.0, "gpu_validation_loss": 2.05,
                       "relative_difference": 0.025, "tolerance": 0.02, "passed": False}
        with tempfile.TemporaryDirectory() as tmp:
            doc, out, printed = self.run_summary(tmp, train, convergence)
            self.assertTrue((out / "train_cuda.json").exists())
        fig = doc["figures"]["training"]
        self.assertEqual(fig["gates"], {"cuda_train_gates": "passed", "train_resume_cuda": "failed"})
        self.assertEqual(fig["cases"]["small"]["kipp"]["peak_bytes"], 9 * GIB)
        self.assertEqual(fig["cases"]["small"]["torch_eager"]["peak_bytes"], 2 * GIB)
        self.assertEqual(fig["cases"]["tiny"]["kipp"]["error"], "kipp: error: something")
        self.assertEqual(fig["convergence"]["gpu_validation_loss"], 2.05)
        self.assertEqual([t["met"] for t in doc["targets"]["training"]], [True, False, True, False])
        self.assertEqual(doc["targets"]["training"][3]["target"], 0.02)
        self.assertIn("training target small 16x512: Kipp / torch.compile tokens/s: 0.929 (at least 1.0) missed", printed)
        self.assertIn("(at most 6.0) met", printed)
        self.assertIn("relative difference 0.0250", printed)

    def test_no_training_results(self):
        with tempfile.TemporaryDirectory() as tmp:
            doc, out, printed = self.run_summary(tmp)
            self.assertFalse((out / "train_cuda.json").exists())
        self.assertEqual(doc["figures"]["training"]["cases"], {})
        self.assertEqual([t["met"] for t in doc["targets"]["training"]], [None] * 4)
        self.assertIn("not measured", printed)


if __name__ == "__main__":
    unittest.main()

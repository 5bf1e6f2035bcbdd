// bench_raw_libtorch: the upper limit somm is measured against.
//
// It loads the same TorchScript file a model repository serves and calls
// libtorch directly, in process (torch::jit::load, eval, c10::InferenceMode,
// forward), with the intra-op thread count the model's config gives the
// server. No queue, no batcher, no wire, no copies in or out: whatever somm
// adds on top of this number is its overhead.
//
// It measures like `somm bench` so the two are comparable: a closed loop at
// `--concurrency` (each thread owns its own clone of the module), a warm-up
// that is discarded, then measurement windows until the last three agree
// within `--stability-pct` (throughput and p99 latency) or `--max-windows`
// is reached; the point reported aggregates the last three windows. The JSON
// it writes has the schema of `somm bench --json` with protocol "inprocess"
// and server_us null.
//
// This is a benchmark tool, not part of the server, so the rule that only
// runtime/torch/ includes <torch/...> does not apply: going around somm's
// runtime is the point.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct RawBenchOptions {
  std::string model_path;       // the TorchScript file, e.g. models/demo/resnet18/1/model.pt
  std::string model_name;       // written as "model"; default: the repository folder name
  std::string shape;            // per-sample input shape, "64" or "3,224,224"
  int batch_size = 1;           // samples per forward call
  int threads = 1;              // at::set_num_threads on every calling thread
  int concurrency = 1;          // closed-loop threads, each with its own module clone
  double warmup_s = 2.0;        // discarded before the first window
  double window_s = 2.0;        // length of one measurement window
  double stability_pct = 10.0;  // last 3 windows within this % of their mean
  int max_windows = 10;         // stop here even when not stable
  std::string json_path;        // empty: no JSON file
  std::string label = "raw-libtorch";
};

// Latencies (ns) of one closed-loop thread since the last Drain(). The mutex
// is uncontended except at window boundaries, which costs tens of ns against
// a forward call of at least microseconds.
class alignas(64) Recorder {
 public:
  void Add(int64_t ns) {
    std::lock_guard<std::mutex> lock(mu_);
    samples_.push_back(ns);
  }
  std::vector<int64_t> Drain() {
    std::vector<int64_t> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(samples_);
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<int64_t> samples_;
};

// Nearest rank (1-based): the smallest sample with at least q of them at or
// below it, as somm bench (src/loadgen/stats.h) and perf_analyzer report.
size_t NearestRank(size_t n, double q) {
  return std::clamp<size_t>(static_cast<size_t>(std::ceil(q * n)), 1, n);
}

struct Window {
  double duration_s = 0;
  std::vector<int64_t> latencies_ns;
  double qps() const { return latencies_ns.size() / duration_s; }
  double p99_ns() const {
    if (latencies_ns.empty()) return 0;
    std::vector<int64_t> sorted = latencies_ns;
    std::sort(sorted.begin(), sorted.end());
    return sorted[NearestRank(sorted.size(), 0.99) - 1];
  }
};

std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> dims;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    const long long d = std::stoll(part);
    if (d <= 0) throw std::invalid_argument("--shape: dims must be positive, got '" + text + "'");
    dims.push_back(d);
  }
  if (dims.empty()) throw std::invalid_argument("--shape is empty");
  return dims;
}

// models/demo/resnet18/1/model.pt -> "resnet18".
std::string ModelNameFromPath(const std::string& path) {
  const std::filesystem::path p(path);
  const auto model_dir = p.parent_path().parent_path().filename().string();
  return model_dir.empty() ? p.stem().string() : model_dir;
}

// The line of a libtorch error that names the problem: the first line of a
// c10::Error, the last line of an interpreter error (its first line is only
// "The following operation failed in the TorchScript interpreter.").
std::string ErrorLine(const std::string& what) {
  const bool interpreter = what.rfind("The following operation failed", 0) == 0;
  if (!interpreter) return what.substr(0, what.find('\n'));
  std::string last, line;
  std::stringstream in(what);
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Rates and latencies are reported to 0.1, as somm bench does.
double Round1(double v) { return std::round(v * 10) / 10; }

// Each value within pct% of the mean of the three.
bool WithinPct(double a, double b, double c, double pct) {
  const double mean = (a + b + c) / 3;
  if (mean <= 0) return false;
  for (double v : {a, b, c}) {
    if (std::abs(v - mean) > mean * pct / 100) return false;
  }
  return true;
}

bool Stable(const std::vector<Window>& w, double pct) {
  if (w.size() < 3) return false;
  const size_t n = w.size();
  for (size_t i = n - 3; i < n; ++i) {
    if (w[i].latencies_ns.empty()) return false;
  }
  return WithinPct(w[n - 1].qps(), w[n - 2].qps(), w[n - 3].qps(), pct) &&
         WithinPct(w[n - 1].p99_ns(), w[n - 2].p99_ns(), w[n - 3].p99_ns(), pct);
}

double PercentileUs(const std::vector<int64_t>& sorted_ns, double q) {
  if (sorted_ns.empty()) return 0;
  return Round1(sorted_ns[NearestRank(sorted_ns.size(), q) - 1] / 1e3);
}

void ClosedLoop(torch::jit::Module module, const RawBenchOptions& options,
                const std::vector<int64_t>& input_shape, Recorder* recorder,
                const std::atomic<bool>* stop) {
  // Thread counts are per calling thread under OpenMP: set them here, as the
  // server's batcher thread does (TorchModel::BindToThread).
  at::init_num_threads();
  at::set_num_threads(options.threads);
  c10::InferenceMode guard;
  // Each thread its own input, made once: input creation is not measured.
  std::vector<torch::jit::IValue> args{torch::randn(input_shape)};
  while (!stop->load(std::memory_order_relaxed)) {
    const auto start = Clock::now();
    torch::jit::IValue out = module.forward(args);
    const auto end = Clock::now();
    recorder->Add(std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count());
  }
}

// Runs warm-up and windows; returns the windows measured (last 3 aggregate).
std::vector<Window> Measure(const torch::jit::Module& module, const RawBenchOptions& options,
                            const std::vector<int64_t>& input_shape) {
  std::atomic<bool> stop{false};
  std::vector<std::unique_ptr<Recorder>> recorders;
  std::vector<std::thread> threads;
  for (int i = 0; i < options.concurrency; ++i) {
    recorders.push_back(std::make_unique<Recorder>());
    threads.emplace_back(ClosedLoop, module.clone(), std::cref(options), std::cref(input_shape),
                         recorders.back().get(), &stop);
  }
  auto drain_all = [&recorders] {
    std::vector<int64_t> all;
    for (auto& r : recorders) {
      auto part = r->Drain();
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  };
  auto sleep_s = [](double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); };

  sleep_s(options.warmup_s);
  drain_all();
  std::vector<Window> windows;
  auto window_start = Clock::now();
  while (static_cast<int>(windows.size()) < options.max_windows) {
    sleep_s(options.window_s);
    Window w;
    w.latencies_ns = drain_all();
    const auto now = Clock::now();
    w.duration_s = std::chrono::duration<double>(now - window_start).count();
    window_start = now;
    windows.push_back(std::move(w));
    if (Stable(windows, options.stability_pct)) break;
  }
  stop = true;
  for (auto& t : threads) t.join();
  return windows;
}

nlohmann::json PointJson(const std::vector<Window>& windows, const RawBenchOptions& options,
                         bool stable) {
  const size_t first = windows.size() >= 3 ? windows.size() - 3 : 0;
  std::vector<int64_t> lat;
  double duration = 0;
  for (size_t i = first; i < windows.size(); ++i) {
    lat.insert(lat.end(), windows[i].latencies_ns.begin(), windows[i].latencies_ns.end());
    duration += windows[i].duration_s;
  }
  std::sort(lat.begin(), lat.end());
  const double qps = duration > 0 ? lat.size() / duration : 0;
  const double mean_us =
      lat.empty() ? 0 : std::accumulate(lat.begin(), lat.end(), 0.0) / lat.size() / 1e3;
  return {
      {"concurrency", options.concurrency},
      {"request_rate", nullptr},
      {"windows", windows.size()},
      {"stable", stable},
      {"stop_reason", stable ? "stable" : "max-windows"},
      {"duration_s", Round1(duration)},
      {"count", lat.size()},
      {"throughput_qps", Round1(qps)},
      {"throughput_sps", Round1(qps * options.batch_size)},
      {"latency_us",
       {{"p50", PercentileUs(lat, 0.50)},
        {"p90", PercentileUs(lat, 0.90)},
        {"p99", PercentileUs(lat, 0.99)},
        {"p999", PercentileUs(lat, 0.999)},
        {"mean", Round1(mean_us)}}},
      {"errors", nlohmann::json::object()},
      {"slo_ms", nullptr},
      {"slo_attainment", nullptr},
      {"server_us", nullptr},
  };
}

int Run(RawBenchOptions options) {
  std::vector<int64_t> input_shape;
  try {
    input_shape = ParseShape(options.shape);
  } catch (const std::exception& e) {
    std::cerr << "bench_raw_libtorch: bad --shape '" << options.shape << "': " << e.what() << "\n";
    return 2;
  }
  input_shape.insert(input_shape.begin(), options.batch_size);
  if (options.model_name.empty()) options.model_name = ModelNameFromPath(options.model_path);

  at::init_num_threads();
  at::set_num_threads(options.threads);
  torch::jit::Module module;
  try {
    module = torch::jit::load(options.model_path);
    module.eval();
    // One call on the main thread checks the shape before threads start.
    c10::InferenceMode guard;
    module.forward({torch::zeros(input_shape)});
  } catch (const std::exception& e) {  // c10::Error, or the interpreter's runtime_error
    std::cerr << "bench_raw_libtorch: model " << options.model_path << " with input shape "
              << torch::IntArrayRef(input_shape) << ": " << ErrorLine(e.what()) << "\n";
    return 1;
  }

  const std::vector<Window> windows = Measure(module, options, input_shape);
  const bool stable = Stable(windows, options.stability_pct);
  nlohmann::json point = PointJson(windows, options, stable);
  const nlohmann::json report = {
      {"tool", "bench_raw_libtorch"},
      {"target", options.label},
      {"protocol", "inprocess"},
      {"model", options.model_name},
      {"mode", "closed"},
      {"batch_size", options.batch_size},
      {"threads", options.threads},
      {"points", nlohmann::json::array({point})},
  };
  if (!options.json_path.empty()) {
    std::ofstream out(options.json_path);
    out << report.dump(2) << "\n";
    if (!out) {
      std::cerr << "bench_raw_libtorch: cannot write " << options.json_path << "\n";
      return 1;
    }
  }
  const auto& lat = point["latency_us"];
  std::printf(
      "%s %s batch=%d threads=%d concurrency=%d: %.1f qps (%.1f samples/s), "
      "p50 %.1f us, p99 %.1f us, %zu windows%s\n",
      options.label.c_str(), options.model_name.c_str(), options.batch_size, options.threads,
      options.concurrency, point["throughput_qps"].get<double>(),
      point["throughput_sps"].get<double>(), lat["p50"].get<double>(), lat["p99"].get<double>(),
      windows.size(), stable ? ", stable" : ", NOT stable");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  RawBenchOptions o;
  CLI::App app{"Raw libtorch in process: the upper limit for serving a TorchScript model"};
  app.add_option("--model", o.model_path, "TorchScript file")->required()->check(CLI::ExistingFile);
  app.add_option("--name", o.model_name, "Model name for the report (default: from the path)");
  app.add_option("--shape", o.shape, "Per-sample input shape, e.g. 64 or 3,224,224")->required();
  app.add_option("--batch-size,-b", o.batch_size, "Samples per forward call")
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--threads,-t", o.threads, "Intra-op threads (at::set_num_threads)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--concurrency,-c", o.concurrency, "Closed-loop threads, one module clone each")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--warmup-s", o.warmup_s, "Warm-up seconds (discarded)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--window-s", o.window_s, "Measurement window seconds")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
  app.add_option("--stability-pct", o.stability_pct, "Last 3 windows within this percentage")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 100.0));
  app.add_option("--max-windows", o.max_windows, "Stop after this many windows")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--json", o.json_path, "Write the report here (somm bench's schema)");
  app.add_option("--label", o.label, "Target name in the report")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return Run(std::move(o));
}

#include "e2e_fixture.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <torch/script.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace somm::testing {
namespace fs = std::filesystem;

std::string DemoRepository() {
  const char* env = std::getenv("SOMM_DEMO_REPO");
  return env ? env : std::string(SOMM_SOURCE_DIR) + "/models/demo";
}

std::string SommBinary() {
  // $SOMM_BINARY: a copy of the binary, so that a rebuild of build/somm while
  // the suites run (the binary is missing while it links) cannot fail them.
  const char* env = std::getenv("SOMM_BINARY");
  return env ? env : SOMM_BINARY;
}

HeldOutDigits LoadHeldOutDigits(const std::string& demo_repo) {
  HeldOutDigits d;
  const fs::path dir = fs::path(demo_repo) / "digits-mlp" / "1" / "validation";
  std::ifstream in(dir / "inputs.bin", std::ios::binary), lab(dir / "labels.bin", std::ios::binary);
  std::vector<float> row(64);
  int64_t label;
  while (in.read(reinterpret_cast<char*>(row.data()), 64 * sizeof(float)) &&
         lab.read(reinterpret_cast<char*>(&label), sizeof(label))) {
    d.pixels.push_back(row);
    d.labels.push_back(label);
  }
  return d;
}

std::vector<float> TorchReference(const std::string& model_file,
                                  const std::vector<std::vector<float>>& batch) {
  c10::InferenceMode guard;
  auto module = torch::jit::load(model_file);
  module.eval();
  auto x = torch::empty({static_cast<int64_t>(batch.size()), 64});
  for (size_t i = 0; i < batch.size(); ++i) {
    std::memcpy(x[static_cast<int64_t>(i)].data_ptr<float>(), batch[i].data(), 64 * sizeof(float));
  }
  auto y = module.forward({x}).toTensor().contiguous();
  return std::vector<float>(y.data_ptr<float>(), y.data_ptr<float>() + y.numel());
}

void SaveShiftedClassifier(const std::string& model_file, const std::string& out_file) {
  torch::NoGradGuard no_grad;
  auto module = torch::jit::load(model_file);
  int rolled = 0;
  for (const auto& p : module.named_parameters(/*recurse=*/true)) {
    if (p.value.dim() >= 1 && p.value.size(0) == 10) {
      p.value.copy_(torch::roll(p.value.clone(), 1, 0));
      ++rolled;
    }
  }
  if (rolled == 0) throw std::runtime_error(model_file + ": no [10, ...] parameter to roll");
  fs::create_directories(fs::path(out_file).parent_path());
  module.save(out_file);
}

namespace {

void WriteFile(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

// A model that raises for large inputs, to test a model failing mid-query.
void SaveThrowingModel(const fs::path& file) {
  torch::jit::Module m("thrower");
  m.define(R"(
def forward(self, x):
    assert bool(x.sum() <= 1000.0), "input sum above 1000 is not supported"
    return x * 2.0
)");
  fs::create_directories(file.parent_path());
  m.save(file.string());
}

}  // namespace

std::string MakeTestRepository(const std::string& demo_repo, const std::string& tag) {
  const fs::path repo =
      fs::temp_directory_path() / ("somm_e2e_repo_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(repo);
  for (const auto& m : kDigitsModels) {
    fs::create_directories(repo / m);
    fs::copy_file(fs::path(demo_repo) / m / "model.yaml", repo / m / "model.yaml");
    fs::create_directory_symlink(fs::absolute(fs::path(demo_repo) / m / "1"), repo / m / "1");
  }
  // Holds queries for up to 1.5 s so a test can have them in flight.
  WriteFile(repo / "slow-mlp" / "model.yaml", R"(max_batch_size: 8
inputs: [{name: pixels, datatype: FP32, shape: [64]}]
outputs: [{name: logits, datatype: FP32, shape: [10]}]
dynamic_batching: {max_queue_delay_us: 1500000}
)");
  fs::create_directory_symlink(fs::absolute(fs::path(demo_repo) / "digits-mlp" / "1"),
                               repo / "slow-mlp" / "1");
  WriteFile(repo / "thrower" / "model.yaml", R"(max_batch_size: 4
inputs: [{name: x, datatype: FP32, shape: [4]}]
outputs: [{name: y, datatype: FP32, shape: [4]}]
)");
  SaveThrowingModel(repo / "thrower" / "1" / "model.pt");
  WriteFile(repo / "broken-config" / "model.yaml", R"(max_batch_size: 4
inputs: [{name: x, datatype: FLOAT, shape: [4]}]
outputs: [{name: y, datatype: FP32, shape: [4]}]
)");
  return repo.string();
}

std::string MakeOneModelRepository(const std::string& demo_repo, const std::string& model,
                                   const std::string& tag) {
  const fs::path repo =
      fs::temp_directory_path() / ("somm_e2e_repo_" + tag + "_" + std::to_string(getpid()));
  fs::remove_all(repo);
  fs::create_directories(repo / model);
  fs::copy_file(fs::path(demo_repo) / model / "model.yaml", repo / model / "model.yaml");
  fs::create_directory_symlink(fs::absolute(fs::path(demo_repo) / model / "1"), repo / model / "1");
  return repo.string();
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

std::string OipBytesElement(const std::string& bytes) {
  std::string out;
  const auto n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return out + bytes;
}

bool WaitForVariantsReady(int http_port, const std::string& model, std::chrono::seconds limit) {
  httplib::Client c("127.0.0.1", http_port);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    auto r = c.Get("/v2/repository/models/" + model + "/variants");
    if (r && r->status == 200) {
      const std::string state =
          nlohmann::json::parse(r->body, nullptr, false).value("state", std::string());
      if (state == "READY") return true;
      if (state == "FAILED") return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return false;
}

std::string WritePngMlpPipeline(const std::string& repo) {
  WriteFile(fs::path(repo) / "png-mlp" / "pipeline.yaml", R"(max_batch_size: 8
inputs: [{name: image, datatype: BYTES, shape: [1]}]
outputs: [{name: class, datatype: INT64, shape: [1], from: top.class}]
steps:
- {name: decode, preprocess: {channels: 1, height: 8, width: 8, scale: 0.0627451},
   inputs: {image: image}}
- {name: classify, model: digits-mlp, inputs: {pixels: decode.pixels}}
- {name: top, postprocess: {argmax: true}, inputs: {logits: classify.logits}}
)");
  return "png-mlp";
}

std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  return {pclose(pipe), out};
}

double MetricValue(const std::string& exposition, const std::string& name_and_labels) {
  std::istringstream lines(exposition);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(name_and_labels + " ", 0) == 0) {
      return std::stod(line.substr(name_and_labels.size() + 1));
    }
  }
  return -1;
}

}  // namespace somm::testing

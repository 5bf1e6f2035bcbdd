// `somm infer` and `somm models`: thin clients over the OIP clients.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "cli/any_client.h"
#include "cli/commands.h"
#include "cli/image_input.h"
#include "cli/model_less_format.h"
#include "frontend/http/oip_json.h"

namespace somm {
namespace {

bool IsImage(const std::string& path) {
  std::string ext = path.substr(path.find_last_of('.') + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "bmp";
}

bool HasPreprocessing(const ModelMetadata& md) {
  const auto it = md.parameters.find("preprocessing");
  return it != md.parameters.end() && std::holds_alternative<std::string>(it->second);
}

// Task form: the image is preprocessed as the first ready model of the task
// declares (a task's models share one dataset, hence one input form).
StatusOr<ModelMetadata> MetadataForTask(AnyClient& client, const std::string& task) {
  SOMM_ASSIGN_OR_RETURN(const std::vector<RepositoryEntry> index, client.Index());
  for (const RepositoryEntry& e : index) {
    if (e.state != "READY") continue;
    StatusOr<ModelMetadata> md = client.Metadata(e.name, "");
    if (!md.ok()) continue;
    const auto it = md->parameters.find("task");
    if (it == md->parameters.end() || it->second != Parameter(task)) continue;
    if (HasPreprocessing(*md)) return md;
  }
  return NotFound("no ready model of task '" + task + "' declares image preprocessing");
}

StatusOr<InferenceRequest> BuildRequest(AnyClient& client, const InferOptions& o) {
  if (IsImage(o.input)) {
    ModelMetadata md;
    if (o.task.empty()) {
      SOMM_ASSIGN_OR_RETURN(md, client.Metadata(o.model, o.version));
    } else {
      SOMM_ASSIGN_OR_RETURN(md, MetadataForTask(client, o.task));
    }
    const std::string whose = o.task.empty() ? "model '" + o.model + "'" : "task '" + o.task + "'";
    if (!HasPreprocessing(md)) {
      return FailedPrecondition(whose + " declares no image preprocessing" +
                                (o.client.protocol == "grpc"
                                     ? " (gRPC metadata carries none: use --protocol http)"
                                     : ""));
    }
    auto it = md.parameters.find("preprocessing");
    if (md.inputs.size() != 1) {
      return FailedPrecondition("image input needs a model with exactly one input");
    }
    SOMM_ASSIGN_OR_RETURN(ImagePreprocessing prep,
                          PreprocessingFromJson(std::get<std::string>(it->second)));
    InferenceRequest r;
    SOMM_ASSIGN_OR_RETURN(Tensor t,
                          LoadImageAsTensor(o.input, prep, md.inputs[0].name, md.inputs[0].shape));
    r.inputs.push_back(std::move(t));
    return r;
  }
  std::ifstream in(o.input, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return oip::DecodeInferRequest(text.str(), std::nullopt);
}

std::string FormatParameter(const Parameter& p) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>)
          return v;
        else if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, double>) {
          // %g: costs of 1e-9 USD stay visible, where to_string prints 0.000000.
          char buf[32];
          std::snprintf(buf, sizeof(buf), "%.6g", v);
          return buf;
        } else
          return std::to_string(v);
      },
      p);
}

void PrintTensor(const Tensor& t, int top_k) {
  std::printf("output %s %s %s\n", t.name.c_str(), DataTypeName(t.datatype),
              ShapeToString(t.shape).c_str());
  if (t.datatype != DataType::kFp32 || t.shape.empty()) return;
  const size_t cols = static_cast<size_t>(t.shape.back());
  const size_t rows = cols ? t.data.size() / 4 / cols : 0;
  for (size_t r = 0; r < rows; ++r) {
    std::vector<float> v(cols);
    std::memcpy(v.data(), t.data.data() + r * cols * 4, cols * 4);
    std::vector<size_t> idx(cols);
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min<size_t>(static_cast<size_t>(std::max(top_k, 1)), cols);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](size_t a, size_t b) { return v[a] > v[b]; });
    std::printf("  sample %zu: class %zu (score %.4f)", r, idx[0], v[idx[0]]);
    for (size_t i = 1; i < k; ++i) std::printf(", then %zu (%.4f)", idx[i], v[idx[i]]);
    std::printf("\n");
  }
}

int Fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
  return 1;
}

}  // namespace

int RunInfer(const InferOptions& o) {
  auto client = AnyClient::Create(o.client);
  if (!client.ok()) return Fail(client.status());
  auto request = BuildRequest(*client, o);
  if (!request.ok()) return Fail(request.status());
  for (const std::string& flag : o.params) {
    auto param = ParseParamFlag(flag);
    if (!param.ok()) return Fail(param.status());
    request->parameters[param->first] = param->second;
  }
  request->model_name = o.model;
  request->model_version = o.version;
  auto response = o.task.empty() ? client->Infer(*request, o.binary)
                                 : client->InferTask(o.task, *request, o.binary);
  if (!response.ok()) return Fail(response.status());
  std::printf("model %s version %s\n", response->model_name.c_str(),
              response->model_version.c_str());
  for (const Tensor& t : response->outputs) PrintTensor(t, o.top_k);
  for (const auto& [k, v] : response->parameters) {
    std::printf("  %s = %s\n", k.c_str(), FormatParameter(v).c_str());
  }
  return 0;
}

int RunModels(const ClientOptions& o) {
  auto client = AnyClient::Create(o);
  if (!client.ok()) return Fail(client.status());
  auto index = client->Index();
  if (!index.ok()) return Fail(index.status());
  std::printf("%-24s %-8s %-12s %-20s %s\n", "MODEL", "VERSION", "STATE", "VARIANTS", "REASON");
  for (const auto& e : *index) {
    // Models that were never registered through somm (or a server without
    // the model-less extension) have no variant state: "-".
    auto variants = client->GetVariants(e.name);
    const std::string summary = variants.ok() ? VariantsSummary(*variants) : "-";
    std::printf("%-24s %-8s %-12s %-20s %s\n", e.name.c_str(),
                e.version.empty() ? "-" : e.version.c_str(), e.state.c_str(), summary.c_str(),
                e.reason.c_str());
  }
  return 0;
}

}  // namespace somm

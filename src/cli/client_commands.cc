// `somm infer` and `somm models`: thin clients over the OIP clients.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "cli/commands.h"
#include "cli/image_input.h"
#include "client/grpc_client.h"
#include "client/http_client.h"
#include "frontend/http/oip_json.h"

namespace somm {
namespace {

// One interface over both protocols, so each command is written once.
class AnyClient {
 public:
  static StatusOr<AnyClient> Create(const ClientOptions& o) {
    AnyClient c;
    if (o.protocol == "grpc") {
      SOMM_ASSIGN_OR_RETURN(c.grpc_, GrpcClient::Connect(o.url));
      return c;
    }
    const auto colon = o.url.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("--url must be host:port, got '" + o.url + "'");
    c.http_ = std::make_unique<HttpClient>(o.url.substr(0, colon), std::atoi(o.url.c_str() + colon + 1));
    return c;
  }
  StatusOr<ModelMetadata> Metadata(const std::string& model, const std::string& version) {
    return grpc_ ? grpc_->GetModelMetadata(model, version) : http_->ModelMetadata(model, version);
  }
  StatusOr<InferenceResponse> Infer(const InferenceRequest& r, bool binary) {
    return grpc_ ? grpc_->Infer(r) : http_->Infer(r, binary);
  }
  StatusOr<std::vector<RepositoryEntry>> Index() {
    return grpc_ ? grpc_->RepositoryIndex(false) : http_->RepositoryIndex();
  }

 private:
  std::unique_ptr<GrpcClient> grpc_;
  std::unique_ptr<HttpClient> http_;
};

bool IsImage(const std::string& path) {
  std::string ext = path.substr(path.find_last_of('.') + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == "png" || ext == "jpg" || ext == "jpeg" || ext == "bmp";
}

StatusOr<InferenceRequest> BuildRequest(AnyClient& client, const InferOptions& o) {
  if (IsImage(o.input)) {
    SOMM_ASSIGN_OR_RETURN(ModelMetadata md, client.Metadata(o.model, o.version));
    auto it = md.parameters.find("preprocessing");
    if (it == md.parameters.end() || !std::holds_alternative<std::string>(it->second)) {
      return FailedPrecondition("model '" + o.model + "' declares no image preprocessing" +
                                (o.client.protocol == "grpc"
                                     ? " (gRPC metadata carries none: use --protocol http)"
                                     : ""));
    }
    if (md.inputs.size() != 1) {
      return FailedPrecondition("image input needs a model with exactly one input");
    }
    SOMM_ASSIGN_OR_RETURN(ImagePreprocessing prep,
                          PreprocessingFromJson(std::get<std::string>(it->second)));
    InferenceRequest r;
    SOMM_ASSIGN_OR_RETURN(Tensor t, LoadImageAsTensor(o.input, prep, md.inputs[0].name,
                                                      md.inputs[0].shape));
    r.inputs.push_back(std::move(t));
    return r;
  }
  std::ifstream in(o.input, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return oip::DecodeInferRequest(text.str(), std::nullopt);
}

std::string FormatParameter(const Parameter& p) {
  return std::visit([](const auto& v) -> std::string {
    using T = std::decay_t<decltype(v)>;
    if constexpr (std::is_same_v<T, std::string>) return v;
    else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
    else return std::to_string(v);
  }, p);
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
  request->model_name = o.model;
  request->model_version = o.version;
  auto response = client->Infer(*request, o.binary);
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
  std::printf("%-24s %-8s %-12s %s\n", "MODEL", "VERSION", "STATE", "REASON");
  for (const auto& e : *index) {
    std::printf("%-24s %-8s %-12s %s\n", e.name.c_str(), e.version.empty() ? "-" : e.version.c_str(),
                e.state.c_str(), e.reason.c_str());
  }
  return 0;
}

}  // namespace somm

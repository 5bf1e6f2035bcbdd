#include "cli/client_options.h"

#include <charconv>
#include <string_view>

namespace somm {

StatusOr<ClientTarget> ResolveClientTarget(const ClientOptions& o) {
  if (o.protocol != "http" && o.protocol != "grpc") {
    return InvalidArgument("-i must be http or grpc, got '" + o.protocol + "'");
  }
  const bool grpc = o.protocol == "grpc";
  ClientTarget t;
  std::string_view url = o.url;
  bool https = false, http = false;
  if (url.starts_with("https://")) {
    https = true;
    url.remove_prefix(8);
  } else if (url.starts_with("http://")) {
    http = true;
    url.remove_prefix(7);
  } else if (url.find("://") != std::string_view::npos) {
    return InvalidArgument("--url takes host:port, http://host:port or https://host:port, got '" +
                           o.url + "'");
  }
  while (url.ends_with('/')) url.remove_suffix(1);
  if (http && o.tls.enabled()) {
    return InvalidArgument("--url says http:// but --tls-ca asks for TLS: give https:// or "
                           "host:port");
  }
  SOMM_RETURN_IF_ERROR(o.tls.Validate());
  t.tls = https || o.tls.enabled();
  if (grpc && t.tls && !o.tls.enabled()) {
    return InvalidArgument("TLS over gRPC needs --tls-ca (the CA of the server's certificate)");
  }
  if (url.empty()) {
    t.host = "127.0.0.1";
    t.port = grpc ? kDefaultGrpcPort : kDefaultRestPort;
  } else {
    // host:port, [v6]:port; the port is required.
    const size_t colon = url.rfind(':');
    const std::string_view port_text =
        colon == std::string_view::npos ? std::string_view() : url.substr(colon + 1);
    const auto [end, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), t.port);
    std::string_view host = colon == std::string_view::npos ? url : url.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    } else if (host.find(':') != std::string_view::npos) {
      host = {};  // an IPv6 address needs its brackets
    }
    if (port_text.empty() || ec != std::errc() || end != port_text.data() + port_text.size() ||
        t.port <= 0 || t.port > 65535 || host.empty()) {
      return InvalidArgument("--url must be host:port (or http://host:port, https://host:port), "
                             "got '" + o.url + "'");
    }
    t.host = std::string(host);
  }
  t.host_port = (t.host.find(':') == std::string::npos ? t.host : "[" + t.host + "]") + ":" +
                std::to_string(t.port);
  return t;
}

StatusOr<std::unique_ptr<HttpClient>> MakeHttpClient(const ClientOptions& o) {
  SOMM_ASSIGN_OR_RETURN(const ClientTarget t, ResolveClientTarget(o));
  HttpClientOptions options;
  options.api_key = o.api_key;
  options.tls = o.tls;
  options.https = t.tls;
  return std::make_unique<HttpClient>(t.host, t.port, options);
}

}  // namespace somm

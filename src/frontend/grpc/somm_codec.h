// somm_codec: conversions between the generated messages of somm's control
// service (proto/somm.proto) and the model-less types of
// api/inference_server.h, for both ends of the wire (the gRPC frontend
// and the gRPC client).
//
// Contract:
//   * Decoders treat their input as hostile: an unknown datatype, a shape dim
//     below -1, an empty tensor name, or an unreadable variant profile is an
//     InvalidArgument Status naming the field; nothing throws.
//   * Registration checks stop at the wire form; the InferenceServer checks
//     the rest (name rules, task form, validation sizes, the model itself).
//   * Variant profiles travel as ProfileToJson documents (see somm.proto).
//   * Pure functions; safe to call from any thread.
//
// Only gRPC adapter code may include this header (it pulls in generated code).
#pragma once

#include <vector>

#include "common/status.h"
#include "proto/somm.grpc.pb.h"
#include "api/inference_server.h"

namespace somm::grpc_codec {

// The RecentDecisions limit: 0 = the default of 100, at most 10000.
inline constexpr uint32_t kDefaultDecisionLimit = 100;
inline constexpr uint32_t kMaxDecisionLimit = 10000;

void EncodeRegistration(const RegistrationRequest& in, somm::RegisterModelRequest* out);
Status DecodeRegistration(const somm::RegisterModelRequest& in, RegistrationRequest* out);

void EncodeRegistrationStatus(const RegistrationStatus& in, somm::GetVariantsResponse* out);
StatusOr<RegistrationStatus> DecodeRegistrationStatus(const somm::GetVariantsResponse& in);

void EncodeDecisions(const std::vector<DecisionRecord>& in, somm::RecentDecisionsResponse* out);
std::vector<DecisionRecord> DecodeDecisions(const somm::RecentDecisionsResponse& in);

}  // namespace somm::grpc_codec

#include "cli/registration_input.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace somm {
namespace {

namespace fs = std::filesystem;

void Write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

template <typename T>
std::string Raw(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

class RegistrationInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("somm_registration_input_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    Write(dir_ / "model.pt", "torchscript");
    // The layout tools/make_demo_repo.py writes.
    Write(dir_ / "validation" / "meta.json",
          R"({"count": 2, "input": "pixels", "datatype": "FP32", "shape": [4],)"
          R"( "labels_datatype": "INT64",)"
          R"( "files": {"inputs": "inputs.bin", "labels": "labels.bin"}})");
    Write(dir_ / "validation" / "inputs.bin", Raw<float>({1, 2, 3, 4, 5, 6, 7, 8}));
    Write(dir_ / "validation" / "labels.bin", Raw<int64_t>({3, 9}));
    Write(dir_ / "model.yaml",
          "task: classification/digits\nmax_batch_size: 8\n"
          "inputs: [{name: pixels, datatype: FP32, shape: [4]}]\n"
          "outputs: [{name: logits, datatype: FP32, shape: [10]}]\n"
          "preprocessing: {image: {channels: 1, height: 2, width: 2, scale: 0.5}}\n");
    options_.name = "m";
    options_.task = "classification/digits";
    options_.model_file = (dir_ / "model.pt").string();
    options_.inputs = {"pixels:FP32:4"};
    options_.outputs = {"logits:FP32:10"};
    options_.max_batch_size = 8;
    options_.description = "d";
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path dir_;
  RegisterOptions options_;
};

TEST_F(RegistrationInputTest, BuildsTheRequestFromFlagsAndFiles) {
  options_.validation_dir = (dir_ / "validation").string();
  options_.preprocessing_from = (dir_ / "model.yaml").string();
  StatusOr<RegistrationRequest> r = BuildRegistration(options_);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->name, "m");
  EXPECT_EQ(r->task, "classification/digits");
  EXPECT_EQ(r->model_bytes, "torchscript");
  ASSERT_EQ(r->inputs.size(), 1u);
  EXPECT_EQ(r->inputs[0].shape, Shape({4}));
  EXPECT_EQ(r->outputs[0].name, "logits");
  EXPECT_EQ(r->max_batch_size, 8);
  EXPECT_EQ(r->validation_count, 2);
  EXPECT_EQ(r->validation_inputs, Raw<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(r->validation_labels, Raw<int64_t>({3, 9}));
  ASSERT_TRUE(r->preprocessing.has_value());
  EXPECT_EQ(r->preprocessing->height, 2);
  EXPECT_FLOAT_EQ(r->preprocessing->scale, 0.5f);
  EXPECT_EQ(r->description, "d");

  // Optional parts stay empty when not asked for.
  options_.validation_dir.clear();
  options_.preprocessing_from.clear();
  r = BuildRegistration(options_);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->validation_count, 0);
  EXPECT_FALSE(r->preprocessing.has_value());
}

TEST_F(RegistrationInputTest, ErrorsNameTheFile) {
  const auto expect_error = [&](const std::string& fragment) {
    StatusOr<RegistrationRequest> r = BuildRegistration(options_);
    ASSERT_FALSE(r.ok()) << fragment;
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status().message();
  };
  options_.model_file = (dir_ / "missing.pt").string();
  expect_error("missing.pt: cannot open");
  options_.model_file = (dir_ / "model.pt").string();

  options_.inputs = {"pixels:FLOAT:4"};
  expect_error("--input 'pixels:FLOAT:4'");
  options_.inputs = {"pixels:FP32:4"};

  options_.validation_dir = (dir_ / "nowhere").string();
  expect_error("meta.json: cannot open");
  options_.validation_dir = (dir_ / "validation").string();

  Write(dir_ / "validation" / "labels.bin", Raw<int64_t>({3}));
  expect_error("labels.bin holds 8 bytes but");
  Write(dir_ / "validation" / "labels.bin", Raw<int64_t>({3, 9}));

  options_.inputs = {"image:FP32:4"};
  expect_error("'input' is 'pixels' but the model's --input name is 'image'");
  options_.inputs = {"pixels:FP64:4"};
  expect_error("'datatype' is 'FP32' but the model's --input datatype is 'FP64'");
  options_.inputs = {"pixels:FP32:8"};
  expect_error("'shape' is [4] but the model's --input shape is [8]");
  options_.inputs = {"pixels:FP32:4"};

  Write(dir_ / "validation" / "meta.json", R"({"count": -1})");
  expect_error("'count' must be a non-negative integer");
  Write(dir_ / "validation" / "meta.json", "{count: 2}");
  expect_error("not valid JSON");
  Write(dir_ / "validation" / "meta.json", R"({"count": 2, "files": {"inputs": 3}})");
  expect_error("'files.inputs' must be a file name");
  Write(dir_ / "validation" / "meta.json", R"({"count": 2, "labels_datatype": "INT32"})");
  expect_error("'labels_datatype' is 'INT32'");
  Write(dir_ / "validation" / "meta.json", R"({"count": 2})");
  options_.preprocessing_from = (dir_ / "model.yaml").string();
  Write(dir_ / "model.yaml",
        "inputs: [{name: pixels, datatype: FP32, shape: [4]}]\n"
        "outputs: [{name: logits, datatype: FP32, shape: [10]}]\n");
  expect_error("has no 'preprocessing' block");
  Write(dir_ / "model.yaml", "preprocessing: {image: {channels: 2}}\n");
  expect_error("model.yaml");
}

}  // namespace
}  // namespace somm

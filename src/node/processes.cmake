# The processes a node assembles (`somm serve`, `somm worker`, `somm
# router`, `somm controller`), the frontends the serving ones share and the
# parts they start from: they wire libtorch, gRPC, Redis and the frontends,
# so they are not core. Included from the top-level CMakeLists.txt after
# those packages are found (their imported targets are visible from there
# on only).
set(SOMM_NODE_DIR ${PROJECT_SOURCE_DIR}/src/node)
somm_library(somm_node_processes
             SOURCES ${SOMM_NODE_DIR}/node_parts.cc ${SOMM_NODE_DIR}/serving_frontends.cc
                     ${SOMM_NODE_DIR}/serve_node.cc ${SOMM_NODE_DIR}/worker_node.cc
                     ${SOMM_NODE_DIR}/router_node.cc ${SOMM_NODE_DIR}/controller_node.cc
             DEPS somm_node somm_embedded somm_sandbox somm_cluster_rpc somm_redis somm_runtime_torch
                  somm_prometheus_metrics somm_http somm_grpc somm_provisioner somm_auth somm_batch somm_batch_routes somm_dashboard_routes somm_pipeline
                  spdlog::spdlog)
target_compile_definitions(somm_node_processes PRIVATE
                           SOMM_DEFAULT_TOOLS_DIR="${PROJECT_SOURCE_DIR}/tools")

# A warm model keeps answering over REST and gRPC while another model's
# cold load takes over a second: the embedded node behind real frontends and
# clients on loopback.
somm_test(cold_load_isolation_test SOURCES ${SOMM_NODE_DIR}/cold_load_isolation_test.cc
          DEPS somm_embedded somm_frontend_http somm_frontend_grpc somm_client_http
               somm_client_grpc)

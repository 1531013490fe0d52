# The libFuzzer targets: tests/fuzz/targets/<name>.cc, seeds in
# tests/fuzz/corpus/<name>/. Read by tests/fuzz/CMakeLists.txt (to build
# them) and tests/fuzz/main_tree.cmake (to run them under CTest).
set(KILN_FUZZ_TARGETS
  json_text        # common/json_text.h parse_json: every API, agent and BMC body
  node_body        # controller/api/node_input.h: node create and merge-patch bodies
  agent_bodies     # controller/api/agent_input.h: agent lookup, heartbeat, result bodies
  api_bodies       # controller/api/{port,token,host,image,profile,tenant,allocation}_input.h: the other API bodies
  agent_seed       # agent/deploy/seed_env.h: the os agent's seed (disk block, NoCloud)
  agent_replies    # agent/runtime/replies.h: kilnd's lookup and heartbeat replies, as the agent reads them
  query            # controller/api/query.h: target split, query decoding
  byte_range       # common/http/byte_range.h: Range headers
  request_framing  # common/http/request_framing.h: Transfer-Encoding / Content-Length framing, against Beast
  dnsmasq_leases   # controller/boot/dhcp_leases.h: dnsmasq's lease file
  ipmi_wire        # drivers/ipmi/wire.h: RMCP/RMCP+ packets, driver and kiln-vbmc sides
  tool_output      # agent/validate/parsers/parse.h: validation tool output
  latency_tables   # agent/validate/parsers/{perftest,nccl_tests}.h latency rows, gdsio.h: typed, bounded extraction
  redfish_parts    # drivers/redfish/inventory_parts.h: what a BMC returns, as inventory reads it
  cluster_files    # cli/cluster_files.h: node values a machine reported, into ssh_config/inventory/hostfile
  machine_values   # common/machine_values.h: addresses, host and interface names, printable fields
  phone_home       # controller/api/phone_home_input.h, common/ssh_host_key.h: cloud-init's phone_home body, host key lines
  qcow2_header     # controller/boot/qcow2_image.h parse_qcow2_header: a tenant's qcow2 header, before qemu-img opens it
  ironic_patch     # controller/ironic/ironic_patch.h: a client's JSON Patch on PATCH /ironic/v1/nodes/{id}
  qemu_map         # controller/boot/qcow2_map.h: qemu-img map's JSON about a tenant's qcow2, and the sparse plan from it
  sparse_stream    # agent/deploy/stream_decoder.h raw+sparse: the converted qcow2 stream the agent writes to disk
)

# kiln_add_fuzz_tests(BINARY_DIR): one CTest test per target (label fuzz),
# running BINARY_DIR/fuzz_<name> through run.sh on a copy of its seeds for
# FUZZ_SECONDS (default 3). Used by the main tree (the fuzzers it builds for
# `make test`) and by this project on its own (`make fuzz`).
set(KILN_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
function(kiln_add_fuzz_tests binary_dir)
  foreach(t ${KILN_FUZZ_TARGETS})
    add_test(NAME fuzz/${t}
             COMMAND ${KILN_FUZZ_DIR}/run.sh ${binary_dir}/fuzz_${t} ${KILN_FUZZ_DIR}/corpus/${t})
    set_tests_properties(fuzz/${t} PROPERTIES LABELS fuzz TIMEOUT 900)
  endforeach()
endfunction()

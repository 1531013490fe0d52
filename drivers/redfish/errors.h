#pragma once
// Turning a Redfish error response into a Kiln Error that carries the BMC's
// own words.
//
// Redfish services answer failures with an error body (DSP0266 "Error
// responses"): {"error": {"code": MessageId, "message": text,
// "@Message.ExtendedInfo": [{"MessageId": ..., "Message": ...}, ...]}}. Real
// BMCs fill these inconsistently (some only set "message", some put the
// useful text in ExtendedInfo, some answer HTML), so extraction tries each in
// turn and falls back to the HTTP reason. Pure functions: no I/O. Each
// MessageId and Message is printable_field-cleaned (no control characters,
// at most 1 KiB): it ends up in a node's last_error.

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace kiln::redfish {

// One message a BMC gave: "MessageId: Message" pieces.
struct BmcMessage {
  std::string message_id;  // "Base.1.8.InternalError"; may be empty
  std::string message;     // human text; may be empty
};

// The messages in an error body, ExtendedInfo first, then error.code/message.
// Also accepts a body whose top level is an ExtendedInfo holder (some BMCs put
// "@Message.ExtendedInfo" at the root of a 4xx/5xx answer). Empty when the
// body has none (not JSON, or no error object).
std::vector<BmcMessage> extract_messages(const nlohmann::json& body);

// "Message (MessageId); Message2 (MessageId2)"; empty when there are none.
std::string describe_messages(const std::vector<BmcMessage>& messages);

// The Error for a non-2xx answer to `what` ("GET /redfish/v1/Systems/1"):
//   401/403       -> kUnauthenticated
//   404           -> kNotFound
//   405           -> kMethodNotAllowed
//   412           -> kPreconditionFailed
//   everything else -> kDriverError
// The message is "redfish: <what> -> HTTP <status>: <BMC's words>".
Error http_error(std::string_view what, int status, const nlohmann::json& body);

}  // namespace kiln::redfish

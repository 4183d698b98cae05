#pragma once
// The rendezvous store's wire protocol (dist/store_server.h is the server,
// dist/store_connection.h the client). Every message is a frame: a 4-byte
// little-endian length, then that many bytes.
//
// Handshake, before anything else: the server sends a fresh random nonce; the
// client answers with its own nonce and HMAC-SHA256(secret, "client" +
// server nonce); the server answers "+" and HMAC-SHA256(secret, "server" +
// client nonce), or "-" and closes the connection. Each side thus proves it
// holds the run's secret without sending it.
//
// Then requests, answered in order: an operation byte and length-prefixed
// fields. Set key value -> "+"; Get key -> "+value" or "-"; Check key... ->
// "+" if all exist, else "-"; Add key delta -> "+new value" (decimal).
#include <cstdint>
#include <string>
#include <string_view>

namespace exogym::runtime::dist::store_protocol {

inline constexpr uint32_t kMaxFrame = 1 << 20;
inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kProofSize = 32;
enum Op : char { kSet = 'S', kGet = 'G', kCheck = 'C', kAdd = 'A' };

// On a blocking socket; false on an error, the end of the stream, a socket
// timeout or a frame over kMaxFrame.
bool send_frame(int fd, std::string_view payload);
bool receive_frame(int fd, std::string& payload);

void put_field(std::string& out, std::string_view field);
// Takes the next field off the front of `in`; false if malformed.
bool take_field(std::string_view& in, std::string& field);

std::string random_nonce();
std::string proof(const std::string& secret, std::string_view role, std::string_view nonce);

}  // namespace exogym::runtime::dist::store_protocol

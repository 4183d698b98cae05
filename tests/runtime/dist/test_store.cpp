// The rendezvous store's security: it listens only on MASTER_ADDR (under
// --nproc nothing of a run is reachable from another machine), and only
// processes holding the run's secret may read or write it
// (runtime/dist/store_server.h, store_connection.h, util/sha256.h).
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_helpers.h"
#include "exogym/build_config.h"
#include "exogym/runtime/dist/store_protocol.h"
#include "exogym/runtime/dist/tcp_ports.h"
#include "exogym/runtime/util/sha256.h"
#include "testing.h"
#if EXOGYM_HAVE_GLOO
#include "exogym/runtime/dist/store_connection.h"
#endif

namespace fs = std::filesystem;
using exogym::runtime::util::hex;
using Clock = std::chrono::steady_clock;

namespace {

struct Listener {
  std::string address;  // the local IP as /proc/net/tcp writes it, in hex
  int port = 0;
  std::string inode;
};

// The TCP sockets in LISTEN state whose inode is in `inodes` (all if empty).
std::vector<Listener> listeners(const std::set<std::string>& inodes) {
  std::vector<Listener> found;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (state != "0A" || (!inodes.empty() && inodes.count(inode) == 0)) continue;
      const size_t colon = local.find(':');
      found.push_back({local.substr(0, colon), std::stoi(local.substr(colon + 1), nullptr, 16), inode});
    }
  }
  return found;
}

// The socket inodes the process `pid` holds open.
std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  const fs::path fds = fs::path("/proc") / std::to_string(pid) / "fd";
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(fds, ec)) {
    const std::string target = fs::read_symlink(entry.path(), ec).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

// The processes whose parent is `parent`.
std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text;
    std::getline(stat, text);
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) children.push_back(std::stoi(name));
  }
  return children;
}

// 127.0.0.1 in /proc/net/tcp, and ::ffff:127.0.0.1 or ::1 in tcp6.
bool is_loopback(const std::string& address) {
  return address == "0100007F" || address == "0000000000000000FFFF00000100007F" ||
         address == "00000000000000000000000001000000";
}

int raw_connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

}  // namespace

TEST_CASE("SHA-256 and HMAC-SHA256 match FIPS 180-4 and RFC 4231", "[dist]") {
  using exogym::runtime::util::hmac_sha256;
  using exogym::runtime::util::sha256;
  CHECK(hex(sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex(sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex(sha256(std::string(1000000, 'a'))) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  CHECK(hex(hmac_sha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  // RFC 4231 case 7: a key and a message both longer than a block.
  CHECK(hex(hmac_sha256(std::string(131, '\xaa'),
                        "This is a test using a larger than block-size key and a larger than block-size data. The "
                        "key needs to be hashed before being used by the HMAC algorithm.")) ==
        "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
  // The proofs' comparison (constant time, both sides of the handshake).
  using exogym::runtime::util::bytes_equal;
  using exogym::runtime::util::digests_equal;
  const std::string proof = std::string(reinterpret_cast<const char*>(sha256("x").data()), 32);
  std::string last = proof;
  last.back() ^= 1;
  CHECK(bytes_equal(proof, proof));
  CHECK_FALSE(bytes_equal(proof, last));
  CHECK_FALSE(bytes_equal(proof, proof.substr(0, 31)));
  CHECK(bytes_equal("", ""));
  CHECK(digests_equal(sha256("x"), sha256("x")));
  CHECK_FALSE(digests_equal(sha256("x"), sha256("y")));
}

#if EXOGYM_HAVE_GLOO

TEST_CASE("the rendezvous store listens on MASTER_ADDR only and serves only holders of the secret", "[dist]") {
  namespace protocol = exogym::runtime::dist::store_protocol;
  using exogym::runtime::dist::StoreConnection;
  const int port = exogym::runtime::dist::pick_free_port();
  const auto timeout = std::chrono::seconds(5);
  StoreConnection host("127.0.0.1", port, /*host=*/true, "the secret", timeout);
  host.set("hello/0", "fingerprint, host and pid");

  std::vector<Listener> bound;
  for (const auto& l : listeners({})) {
    if (l.port == port) bound.push_back(l);
  }
  REQUIRE(bound.size() == 1);
  CHECK(bound[0].address == "0100007F");

  StoreConnection member("127.0.0.1", port, false, "the secret", timeout);
  CHECK(member.get("hello/0") == "fingerprint, host and pid");
  CHECK(member.add("aborts", 0) == 0);

  // A client with another secret is refused, naming the variables to set.
  CHECK_THROWS_WITH(StoreConnection("127.0.0.1", port, false, "a guess", timeout),
                    Catch::Contains("refused this process") && Catch::Contains("EXOGYM_RUN_SECRET"));
  // A plain client that skips the handshake can neither write nor read.
  const int fd = raw_connect(port);
  std::string nonce, answer;
  REQUIRE(protocol::receive_frame(fd, nonce));
  CHECK(nonce.size() == protocol::kNonceSize);
  std::string write_abort(1, protocol::kSet);
  protocol::put_field(write_abort, "abort/0");
  protocol::put_field(write_abort, "stranger");
  CHECK(protocol::send_frame(fd, write_abort));
  REQUIRE(protocol::receive_frame(fd, answer));
  CHECK(answer == "-");
  CHECK_FALSE(protocol::receive_frame(fd, answer));  // and the connection is closed
  ::close(fd);
  CHECK_FALSE(host.check({"abort/0"}));
  CHECK(host.refused_clients() == 2);
  // A client that is not a store client at all is refused too, and the run
  // goes on.
  const int garbage = raw_connect(port);
  CHECK(::send(garbage, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL) == 18);
  REQUIRE(protocol::receive_frame(garbage, nonce));
  const bool answered = protocol::receive_frame(garbage, answer);
  CHECK((!answered || answer == "-"));
  ::close(garbage);
  CHECK(member.add("aborts", 0) == 0);
  CHECK(member.get("hello/0") == "fingerprint, host and pid");
}

TEST_CASE("a run over several processes without a secret is refused, naming the variable", "[dist][cli]") {
  exogym::test::TempDir dir("no-secret");
  const auto file = exogym::test::write_manifest(dir, "m", exogym::test::small_manifest(2));
  const auto o = exogym::test::run_cli({file.string()}, dir / "log.txt", 30,
                                       {{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"EXOGYM_RUN_SECRET", ""}});
  CHECK(o.code == 2);
  CHECK_THAT(o.output, Catch::Contains("EXOGYM_RUN_SECRET: a run over several processes needs a shared secret"));
}

TEST_CASE("under --nproc every socket of the run listens on loopback only", "[dist][cli]") {
  exogym::test::TempDir dir("nproc-loopback");
  auto m = exogym::test::small_manifest(2);
  m["train"]["max_steps"] = 100000000;  // stopped below
  m["eval"]["interval"] = 0;
  const auto file = exogym::test::write_manifest(dir, "m", m);
  const auto started = Clock::now();
  const pid_t launcher = exogym::test::spawn({"--nproc", "2", "--quiet", file.string()}, {}, dir / "log.txt");
  // Process 0 listens for the store all along; Gloo listens while its pairs
  // connect. Every listening socket the processes opened (not those of this
  // test's environment, listening before the run) is kept.
  std::set<std::string> inherited = socket_inodes(::getpid());
  for (const auto& l : listeners({})) inherited.insert(l.inode);  // listening before the run
  std::vector<Listener> found;
  std::set<std::pair<std::string, int>> seen;
  // Until 3 s after the first one is seen (60 s at most: the processes load
  // their data first).
  auto deadline = started + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    std::set<std::string> inodes;
    for (pid_t child : children_of(launcher)) {
      for (const auto& inode : socket_inodes(child)) {
        if (inherited.count(inode) == 0) inodes.insert(inode);
      }
    }
    // (An empty set would list every listening socket of the host.)
    for (const auto& l : inodes.empty() ? std::vector<Listener>() : listeners(inodes)) {
      if (seen.insert({l.address, l.port}).second) found.push_back(l);
    }
    if (!found.empty()) deadline = std::min(deadline, Clock::now() + std::chrono::seconds(3));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(launcher, SIGTERM);
  exogym::test::wait_for(launcher, dir / "log.txt", started, 120);
  REQUIRE(!found.empty());
  for (const auto& l : found) {
    INFO("listening on " << l.address << " port " << l.port);
    CHECK(is_loopback(l.address));
  }
}

#endif

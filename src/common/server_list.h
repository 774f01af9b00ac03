// ServerList: the servers a client may reach (`--server a,b,c`), and the one it uses now.
//
// Several servers share one store; one of them leads (docs/operations.md, "Several servers").
// A client tries the URLs in order and sticks with the one that answers; it moves on when the
// connection fails (Next) or when a server answers 503 naming the leader (Follow, with the URL of
// the X-Arbiter-Leader header), which may be a URL not in the list.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter {

// The header a follower names the leader's URL in.
inline constexpr const char* kLeaderHeader = "X-Arbiter-Leader";

// "a, b,c" -> {"a", "b", "c"}: split at commas, spaces trimmed, empty items dropped.
inline std::vector<std::string> SplitServerUrls(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = text.substr(start, comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '/')) item.remove_suffix(1);
    if (!item.empty()) out.emplace_back(item);
    start = comma + 1;
  }
  return out;
}

class ServerList {
 public:
  // `text`: one URL or several separated by commas.
  explicit ServerList(std::string_view text) : urls_(SplitServerUrls(text)) {
    if (urls_.empty()) urls_.emplace_back(text);
    current_ = urls_.front();
  }

  // The URL to use now.
  std::string current() const {
    std::lock_guard<std::mutex> lock(mu_);
    return current_;
  }
  const std::vector<std::string>& urls() const { return urls_; }
  size_t size() const { return urls_.size(); }

  // `failed` did not answer: the next URL of the list after it (wrapping), unless another call
  // moved on already. Returns the URL to use now.
  std::string Next(const std::string& failed) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed != current_) return current_;
    size_t i = 0;
    while (i < urls_.size() && urls_[i] != failed) ++i;
    current_ = urls_[i < urls_.size() ? (i + 1) % urls_.size() : 0];
    return current_;
  }
  // A server named `leader` as the leader: use it from now on.
  void Follow(const std::string& leader) {
    if (leader.empty()) return;
    std::lock_guard<std::mutex> lock(mu_);
    current_ = leader;
  }

 private:
  std::vector<std::string> urls_;  // set once, by the constructor
  mutable std::mutex mu_;
  std::string current_;  // guarded by mu_
};

}  // namespace arbiter

#include "model/execution.h"

namespace arbiter {

std::string_view TaskEventName(TaskEvent e) {
  switch (e) {
    case TaskEvent::kStarted:
      return "started";
    case TaskEvent::kExited:
      return "exited";
    case TaskEvent::kLost:
      return "lost";
    case TaskEvent::kCheckpointed:
      return "checkpointed";
    case TaskEvent::kNote:
      return "note";
  }
  return "unknown";
}

bool ParseTaskEvent(std::string_view s, TaskEvent* out) {
  for (TaskEvent e : {TaskEvent::kStarted, TaskEvent::kExited, TaskEvent::kLost,
                      TaskEvent::kCheckpointed, TaskEvent::kNote}) {
    if (TaskEventName(e) == s) {
      *out = e;
      return true;
    }
  }
  return false;
}

}  // namespace arbiter

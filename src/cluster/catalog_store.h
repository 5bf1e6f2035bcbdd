// CatalogStore: where a cluster's leader controller publishes the models it
// serves, and where routers read them.
//
// The catalog maps each served model to a generation, a string that changes
// whenever the model's records do; beside each name the store keeps the
// model's published entry (registry/published_model.h), written with its
// generation in one step, so a reader that sees a generation reads the entry
// written with it.
//
// The catalog is soft state: a store may lose it whole (Redis restarted
// empty) and the leader writes it again model by model. A reader must not
// take a model's absence from a catalog written that way for its removal.
// So the leader marks the catalog complete once every model it serves is in
// it (MarkComplete), and a store that lost the catalog loses the mark with
// it: a reader forgets the models a catalog does not list only while it is
// marked complete.
//
// Thread-safety: every method may be called from any thread. Read() returns
// the catalog as this process's view holds it (cheap, no round trip); the
// writes and PublishedModel() go to the store.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "common/status.h"

namespace somm::cluster {

struct Catalog {
  std::map<std::string, std::string> models;  // model -> generation
  bool complete = false;  // every model the leader serves is listed
};

class CatalogStore {
 public:
  virtual ~CatalogStore() = default;

  // The catalog in this process's view; `models` and `complete` are read
  // together.
  virtual Catalog ReadCatalog() const = 0;
  // Writes one model's generation and, when `entry` is not empty, its
  // published entry, in one step; RemoveModel removes both.
  virtual Status PublishModel(const std::string& model, const std::string& generation,
                              const std::string& entry) = 0;
  virtual Status RemoveModel(const std::string& model) = 0;
  // Marks the catalog complete, naming who did (the leader's lease holder).
  virtual Status MarkCatalogComplete(const std::string& publisher) = 0;
  // The published entry of `model`; NOT_FOUND when none.
  virtual StatusOr<std::string> PublishedModel(const std::string& model) = 0;
  // `on_change` runs after the catalog in the view changed (on the store's
  // own thread, or on the writer's for a store without one).
  virtual void SetOnCatalogChange(std::function<void()> on_change) = 0;
};

}  // namespace somm::cluster

#include "actors/embedded.hpp"

#include <thread>

namespace weightd::actors {

template <class Reply, class Handle, class... Ts>
std::future<result<Reply>> embedded::call(Handle handle, Ts... xs) {
  auto promise = std::make_shared<std::promise<result<Reply>>>();
  auto future = promise->get_future();
  auto timeout = this->timeout;
  system_->spawn([=](caf::event_based_actor* self) {
    self->request(handle, timeout, xs...)
        .then(
            [=](Reply& reply) {
              promise->set_value(std::move(reply));
              self->quit();
            },
            [=](caf::error& err) {
              promise->set_value(to_status(err));
              self->quit();
            });
  });
  return future;
}

result<std::unique_ptr<embedded>> embedded::start(
    node_config config, unsigned threads, std::shared_ptr<persistence::journal_backend> backend) {
  std::unique_ptr<embedded> e{new embedded};
  e->config_ = std::make_unique<caf::actor_system_config>();
  add_error_category(*e->config_);
  if (!threads) threads = std::max(1u, std::thread::hardware_concurrency());
  e->config_->set("scheduler.max-threads", static_cast<size_t>(threads));
  e->config_->set("scheduler.policy", caf::atom("sharing"));
  e->system_ = std::make_unique<caf::actor_system>(*e->config_);
  auto started = node::start(*e->system_, std::move(config), std::move(backend));
  if (!started) return started.error();
  e->node_ = std::move(*started);
  return e;
}

embedded::~embedded() {
  if (node_) node_->stop();
  node_.reset();
  system_.reset();  // waits for every actor to finish
}

std::future<result<revision_view>> embedded::begin_import(actors::begin_import cmd) {
  return call<revision_view>(node_->registry(), std::move(cmd));
}
std::future<result<revision_view>> embedded::commit_import(actors::commit_import cmd) {
  return call<revision_view>(node_->registry(), std::move(cmd));
}
std::future<result<removal_result>> embedded::abort_import(actors::abort_import cmd) {
  return call<removal_result>(node_->registry(), std::move(cmd));
}
std::future<result<revision_view>> embedded::update_policy(actors::update_policy cmd) {
  return call<revision_view>(node_->registry(), std::move(cmd));
}
std::future<result<removal_result>> embedded::remove_revision(actors::remove_revision cmd) {
  return call<removal_result>(node_->registry(), std::move(cmd));
}
std::future<result<revision_view>> embedded::get_revision(actors::get_revision cmd) {
  return call<revision_view>(node_->registry(), std::move(cmd));
}
std::future<result<revision_page>> embedded::list_revisions(actors::list_revisions cmd) {
  return call<revision_page>(node_->registry(), std::move(cmd));
}
std::future<result<lease_view>> embedded::acquire_lease(actors::acquire_lease cmd) {
  return call<lease_view>(node_->registry(), std::move(cmd));
}
std::future<result<lease_view>> embedded::renew_lease(actors::renew_lease cmd) {
  return call<lease_view>(node_->registry(), std::move(cmd));
}
std::future<result<lease_view>> embedded::release_lease(actors::release_lease cmd) {
  return call<lease_view>(node_->registry(), std::move(cmd));
}
std::future<result<lease_view>> embedded::revoke_lease(actors::revoke_lease cmd) {
  return call<lease_view>(node_->registry(), std::move(cmd));
}
std::future<result<lease_list>> embedded::list_leases(actors::list_leases cmd) {
  return call<lease_list>(node_->registry(), std::move(cmd));
}
std::future<result<object_info>> embedded::stat_object(std::string tenant, std::string key) {
  return call<object_info>(node_->objects(), stat_atom::value, std::move(tenant), std::move(key));
}

result<object_info> embedded::put_object(put_request request, std::string_view bytes) {
  request.size = bytes.size();
  auto ticket = call<put_ticket>(node_->objects(), put_atom::value, request).get();
  if (!ticket) return ticket.error();
  auto writer = persistence::blob_writer::create(ticket->temp_path, ticket->want_sha256,
                                                 ticket->enospc_after_bytes);
  status written = writer ? (*writer)->write(bytes.data(), bytes.size()) : writer.error();
  auto digest = written.ok() ? (*writer)->finish() : result<persistence::blob_digest>{written};
  if (!digest) {
    caf::anon_send(node_->objects(), abort_atom::value, ticket->put_id);
    return digest.error();
  }
  return call<object_info>(node_->objects(), put_atom::value, ticket->put_id, *digest).get();
}

}  // namespace weightd::actors

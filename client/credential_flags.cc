#include "credential_flags.h"

namespace normd {

const char kCredentialUsage[] =
    "credentials:    --tls-ca FILE (TLS) --tls-cert FILE --tls-key FILE (mutual TLS)\n"
    "                --tls-server-name NAME --token-file FILE (bearer token)\n";

void AddCredentialFlags(std::map<std::string, bool>* known) {
  for (const char* name : {"tls-ca", "tls-cert", "tls-key", "tls-server-name", "token-file"}) {
    (*known)[name] = false;
  }
}

void ApplyCredentialFlags(const CliFlags& f, ClientOptions* o) {
  o->tls_ca_file = f.GetString("tls-ca");
  o->tls_cert_file = f.GetString("tls-cert");
  o->tls_key_file = f.GetString("tls-key");
  o->tls_server_name = f.GetString("tls-server-name");
  o->token_file = f.GetString("token-file");
}

}  // namespace normd

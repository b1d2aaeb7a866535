// The credential flags normctl and normbench share, as normd's own flags name them:
//   --tls-ca FILE            TLS: the CA bundle the server's certificate is checked against
//   --tls-cert, --tls-key    mutual TLS: the client certificate and its key
//   --tls-server-name NAME   the name the server's certificate must carry (default: the
//                            target's host)
//   --token-file FILE        bearer token sent as `authorization: Bearer ...`
// Stateless; parse once in main.
#ifndef NORMD_CLIENT_CREDENTIAL_FLAGS_H_
#define NORMD_CLIENT_CREDENTIAL_FLAGS_H_

#include <map>
#include <string>

#include "normd/client.h"
#include "normd/common/cli_flags.h"

namespace normd {

// Adds the flags above (none boolean) to a CliFlags table.
void AddCredentialFlags(std::map<std::string, bool>* known);
// Copies the given ones into `options`.
void ApplyCredentialFlags(const CliFlags& flags, ClientOptions* options);
// The usage lines above.
extern const char kCredentialUsage[];

}  // namespace normd

#endif  // NORMD_CLIENT_CREDENTIAL_FLAGS_H_

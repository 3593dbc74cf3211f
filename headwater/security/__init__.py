"""Authentication and authorization: SASL mechanisms, SCRAM credentials, TLS contexts, the ACL
authorizer and the audit log. Sans-IO: the server shell feeds bytes and requests in and does the I/O."""

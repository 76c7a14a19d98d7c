// Package deploy holds the Kubernetes manifests of the digest job under
// kubernetes/ and, in its tests, checks them: every manifest decodes
// strictly into the Kubernetes API types, has the properties the runbook
// relies on, and passes only commands and flags that the digest binary
// knows. It is its own module so that k8s.io/api stays out of the job's
// dependencies.
package deploy

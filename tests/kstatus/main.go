// Command kstatus reads Kubernetes objects as JSON (one array on stdin) and prints, for each, the
// status that sigs.k8s.io/cli-utils' kstatus computes: the rules Flux health checks and
// cli-utils-based tools apply to a resource. The acceltrial test suite feeds it recorded trials.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

// result is what the tests compare: kstatus' verdict and its message for one object.
type result struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	// Each object is decoded by apimachinery, as a client would: integers stay int64.
	var objects []json.RawMessage
	if err := json.NewDecoder(os.Stdin).Decode(&objects); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: stdin must be a JSON array of objects: %v\n", err)
		os.Exit(2)
	}
	results := make([]result, 0, len(objects))
	for _, raw := range objects {
		object := &unstructured.Unstructured{}
		if err := object.UnmarshalJSON(raw); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(2)
		}
		computed, err := status.Compute(object)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(1)
		}
		results = append(results, result{Status: computed.Status.String(), Message: computed.Message})
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
}

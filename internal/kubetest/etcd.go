package kubetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// PutStored writes value under key straight into etcd (through etcd's JSON
// gateway, /v3/kv/put), bypassing the API server's validation: how a test
// makes an object that an older API server stored and a newer one still
// serves, but refuses to create. The key is the API server's, e.g.
// /registry/networkpolicies/NAMESPACE/NAME; the API server reads a JSON
// value (with apiVersion and kind) as it reads its own protobuf ones.
func (s *Server) PutStored(ctx context.Context, key string, value []byte) error {
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte(key)),
		"value": base64.StdEncoding.EncodeToString(value),
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.etcdURL+"/v3/kv/put", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd put %s: %w", key, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd put %s: %s: %s", key, resp.Status, out)
	}
	return nil
}

package admission

import (
	"encoding/json"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

func jsonUnmarshal(raw []byte, into any) error { return json.Unmarshal(raw, into) }

func specEqual(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

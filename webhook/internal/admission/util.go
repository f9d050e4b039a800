package admission

import (
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

func specEqual(a, b any) bool { return apiequality.Semantic.DeepEqual(a, b) }

package v1beta1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalHelmChartSourceReference is Flux's reference to the source of a Helm chart, in the template's
// namespace.
type LocalHelmChartSourceReference struct {
	// APIVersion of the source.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the source: HelmRepository, GitRepository or Bucket.
	// +required
	// +kubebuilder:validation:Enum=HelmRepository;GitRepository;Bucket
	Kind string `json:"kind"`

	// Name of the source.
	// +required
	Name string `json:"name"`
}

// HelmChartSpec is the part of Flux's HelmChart spec a template gives in helm.chartSpec.
type HelmChartSpec struct {
	// Chart is the chart's name (or path in a Git repository or bucket).
	// +required
	Chart string `json:"chart"`

	// Version is a semantic version range of the chart.
	// +optional
	// +kubebuilder:default="*"
	Version string `json:"version,omitempty"`

	// SourceRef is the source of the chart. KCM's webhook defaults it to HelmRepository kcm-templates.
	// +required
	SourceRef LocalHelmChartSourceReference `json:"sourceRef"`

	// Interval is how often Flux checks the source. KCM's webhook defaults it.
	// +required
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern="^([0-9]+(\\.[0-9]+)?(ms|s|m|h))+$"
	Interval metav1.Duration `json:"interval"`

	// ReconcileStrategy is ChartVersion or Revision.
	// +optional
	// +kubebuilder:validation:Enum=ChartVersion;Revision
	// +kubebuilder:default=ChartVersion
	ReconcileStrategy string `json:"reconcileStrategy,omitempty"`

	// ValuesFiles are alternative values files of the chart, merged in order.
	// +optional
	ValuesFiles []string `json:"valuesFiles,omitempty"`

	// IgnoreMissingValuesFiles ignores valuesFiles that do not exist.
	// +optional
	IgnoreMissingValuesFiles bool `json:"ignoreMissingValuesFiles,omitempty"`

	// Verify configures the verification of the chart's signature; kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Verify *apiextensionsv1.JSON `json:"verify,omitempty"`

	// Suspend stops Flux reconciling the chart.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// CrossNamespaceSourceReference is Flux's reference to a chart source in any namespace.
type CrossNamespaceSourceReference struct {
	// APIVersion of the source.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`

	// Kind of the source: OCIRepository, HelmChart or ExternalArtifact (KCM accepts HelmChart).
	// +required
	// +kubebuilder:validation:Enum=OCIRepository;HelmChart;ExternalArtifact
	Kind string `json:"kind"`

	// Name of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// Namespace of the source; the template's namespace when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// LocalSourceRef names an object holding a template's source.
type LocalSourceRef struct {
	// Kind is ConfigMap, Secret, GitRepository, Bucket or OCIRepository.
	// +required
	// +kubebuilder:validation:Enum=ConfigMap;Secret;GitRepository;Bucket;OCIRepository
	Kind string `json:"kind"`

	// Name of the object.
	// +required
	Name string `json:"name"`

	// Namespace of the object; the template's namespace when empty.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// RemoteSourceSpec is an inline Flux source: exactly one of git, bucket or oci.
// +kubebuilder:validation:XValidation:rule="has(self.git) ? (!has(self.bucket) && !has(self.oci)) : true",message="Git, Bucket and OCI are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.bucket) ? (!has(self.git) && !has(self.oci)) : true",message="Git, Bucket and OCI are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.oci) ? (!has(self.git) && !has(self.bucket)) : true",message="Git, Bucket and OCI are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.git) || has(self.bucket) || has(self.oci)",message="One of Git, Bucket or OCI must be specified."
type RemoteSourceSpec struct {
	// Git is a Flux GitRepository spec, kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Git *apiextensionsv1.JSON `json:"git,omitempty"`

	// Bucket is a Flux Bucket spec, kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Bucket *apiextensionsv1.JSON `json:"bucket,omitempty"`

	// OCI is a Flux OCIRepository spec, kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	OCI *apiextensionsv1.JSON `json:"oci,omitempty"`
}

// SourceSpec is the source of a Kustomize, raw-resource or chartSource template: exactly one of
// localSourceRef or remoteSourceSpec.
// +kubebuilder:validation:XValidation:rule="has(self.localSourceRef) ? !has(self.remoteSourceSpec): true",message="LocalSource and RemoteSource are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.remoteSourceSpec) ? !has(self.localSourceRef): true",message="LocalSource and RemoteSource are mutually exclusive."
// +kubebuilder:validation:XValidation:rule="has(self.localSourceRef) || has(self.remoteSourceSpec)",message="One of LocalSource or RemoteSource must be specified."
type SourceSpec struct {
	// LocalSourceRef names an existing object holding the source.
	// +optional
	LocalSourceRef *LocalSourceRef `json:"localSourceRef,omitempty"`

	// RemoteSourceSpec is an inline Flux source KCM creates.
	// +optional
	RemoteSourceSpec *RemoteSourceSpec `json:"remoteSourceSpec,omitempty"`

	// DeploymentType is Local (to the management cluster) or Remote (to the child clusters).
	// +optional
	// +kubebuilder:validation:Enum=Local;Remote
	// +kubebuilder:default=Remote
	DeploymentType string `json:"deploymentType,omitempty"`

	// Path inside the source.
	// +optional
	Path string `json:"path,omitempty"`
}

// HelmSpec is a template's Helm chart: exactly one of chartSpec, chartRef or chartSource.
// +kubebuilder:validation:XValidation:rule="(has(self.chartSpec) ? (!has(self.chartSource) && !has(self.chartRef)): true)",message="chartSpec, chartSource and chartRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="(has(self.chartSource) ? (!has(self.chartSpec) && !has(self.chartRef)): true)",message="chartSpec, chartSource and chartRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="(has(self.chartRef) ? (!has(self.chartSpec) && !has(self.chartSource)): true)",message="chartSpec, chartSource and chartRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="has(self.chartSpec) || has(self.chartRef) || has(self.chartSource)",message="one of chartSpec, chartRef or chartSource must be set"
type HelmSpec struct {
	// ChartSpec makes KCM create a Flux HelmChart from this spec.
	// +optional
	ChartSpec *HelmChartSpec `json:"chartSpec,omitempty"`

	// ChartRef references an existing Flux HelmChart.
	// +optional
	ChartRef *CrossNamespaceSourceReference `json:"chartRef,omitempty"`

	// ChartSource is a source holding the chart (added after KCM v1.3).
	// +optional
	// +kubebuilder:validation:XValidation:rule="has(self.localSourceRef) ? (self.localSourceRef.kind != 'Secret' && self.localSourceRef.kind != 'ConfigMap'): true",message="Secret and ConfigMap are not supported as Helm chart sources"
	ChartSource *SourceSpec `json:"chartSource,omitempty"`
}

// SourceStatus is the observed state of a template's source.
type SourceStatus struct {
	// Kind of the source object.
	// +optional
	Kind string `json:"kind,omitempty"`

	// Name of the source object.
	// +optional
	Name string `json:"name,omitempty"`

	// Namespace of the source object.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Artifact is the source's Flux artifact, kept as written.
	// +optional
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Artifact *apiextensionsv1.JSON `json:"artifact,omitempty"`

	// Conditions of the source.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ObservedGeneration of the source.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// TemplateStatusCommon is the status every KCM template shares.
type TemplateStatusCommon struct {
	// Valid is true when KCM found the template's chart and validated it. Check it before use.
	// +required
	Valid bool `json:"valid"`

	// ValidationError says why the template is not valid.
	// +optional
	ValidationError string `json:"validationError,omitempty"`

	// ChartRef references the Flux HelmChart of the template.
	// +optional
	ChartRef *CrossNamespaceSourceReference `json:"chartRef,omitempty"`

	// ChartVersion is the version of the chart.
	// +optional
	ChartVersion string `json:"chartVersion,omitempty"`

	// Config are the chart's default values.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Config *apiextensionsv1.JSON `json:"config,omitempty"`

	// Description of the template, from the chart.
	// +optional
	Description string `json:"description,omitempty"`

	// SchemaConfigMapName names the ConfigMap holding the chart's values schema.
	// +optional
	SchemaConfigMapName string `json:"schemaConfigMapName,omitempty"`

	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}
